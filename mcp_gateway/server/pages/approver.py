"""Approvers sign in with the identity provider on the approval page (front door).

An approval link reaches whoever the agent shows it to, the requester included, so by itself it
says nothing about who approves. With ``front_door.approver_client_id`` the approval page offers
"Sign in": the gateway, as that client of the issuer, runs the authorization code grant with PKCE
(S256) and ``resource`` = this gateway, and validates the access token it gets back exactly as
``/mcp`` validates a client's (signature, ``iss``, ``aud``, expiry, scopes, the user claim). The
browser then holds a short session cookie naming that user; the approval records them as
``decided_by``, and ``separate_approver`` refuses the requester.

- ``state`` is 256 random bits, stored as its SHA-256 for ten minutes, taken once (any instance);
  the PKCE verifier and the approval link travel sealed under a key derived from the state
  (``core.oauth2_pending``), as for connectors' OAuth2 sign-ins.
- The client is public (PKCE only) unless ``secret set --front-door approver`` stored a secret;
  then it authenticates with HTTP Basic (``client_secret_basic``).
- The session cookie is 256 random bits, stored as its SHA-256 with the user for 30 minutes,
  ``HttpOnly``, path ``/approvals/``, ``SameSite=Lax`` (the provider's redirect back is a cross-site
  navigation; every POST still needs the page's CSRF token).
- Nothing the provider answers is echoed: an error shows only as an RFC 6749 error code.
"""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

import httpx2
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...auth.oauth2 import pkce_challenge
from ...core.oauth2_pending import PendingAuthorization, open_pending, seal_pending
from ...primitives.secrets import PROJECT_WIDE
from ...services.front_door import FRONT_DOOR_SECRETS, TokenRefused, client_basic
from ..mcp_door import FrontDoor, SealedSecrets
from ._common import GONE, CookieSession, PageContext, digest, message, security_headers

__all__ = ["APPROVER_COOKIE", "CALLBACK_PATH", "ApproverSignIn"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/approvals/callback"
APPROVER_COOKIE = "mgw_approver"
STATE_KIND = "approver_state"
STATE_TTL = timedelta(minutes=10)
# Lax: the provider's redirect back is a cross-site navigation (every POST still needs the CSRF token).
SESSION = CookieSession("approver_session", APPROVER_COOKIE, timedelta(minutes=30), "/approvals/", "lax")
_ERROR_CODE = re.compile(r"^[a-z_]{1,40}$")
_START_OVER = "Open the approval link again to retry."


@dataclass(frozen=True)
class ApproverSignIn:
    """The approval page's sign-in through the front door's issuer."""

    ctx: PageContext
    door: FrontDoor
    client_id: str
    vault: SealedSecrets
    """Where the client's own secret is kept, when it has one (``secret set --front-door approver``)."""

    @property
    def provider_origin(self) -> str:
        """For the page's CSP ``form-action``: the sign-in form's POST is answered by a redirect there."""
        url = httpx2.URL(self.door.endpoints.authorization or "")
        return f"{url.scheme}://{url.netloc.decode()}"

    @property
    def redirect_uri(self) -> str:
        return f"{self.ctx.links.public_url}{CALLBACK_PATH}"

    async def who(self, request: Request) -> str | None:
        """The user this browser signed in as, if its session is still live."""
        session = await SESSION.who(self.ctx, request)
        return session[0] if session is not None else None

    async def begin(self, link_token: str) -> Response:
        """Send the browser to the provider; it comes back to ``CALLBACK_PATH`` with a code."""
        ctx = self.ctx
        now = ctx.clock.now()
        state = secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(48)
        pending = PendingAuthorization(
            connector="",
            principal="",
            link_token=link_token,
            verifier=verifier,
            redirect_uri=self.redirect_uri,
            expires_at=now + STATE_TTL,
        )
        await ctx.sessions.put_ephemeral(STATE_KIND, digest(state), seal_pending(state, pending), now + STATE_TTL, now)
        params = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "state": state,
            "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256",
            "resource": self.door.resource_url,  # RFC 8707: a token for this gateway, checked like /mcp's
        }
        if self.door.config.scopes:
            params["scope"] = " ".join(self.door.config.scopes)
        url = httpx2.URL(self.door.endpoints.authorization or "").copy_merge_params(params)
        return RedirectResponse(str(url), status_code=303, headers=security_headers())

    async def callback(self, request: Request) -> Response:
        ctx = self.ctx
        query = request.query_params
        state = query.get("state", "")
        sealed = (
            await ctx.sessions.take_ephemeral(STATE_KIND, digest(state), ctx.clock.now())
            if state and len(state) <= 512
            else None
        )
        pending = open_pending(state, sealed) if sealed is not None else None
        if pending is None:
            return message(
                "Sign-in not recognised",
                f"This sign-in was not started here, took longer than ten minutes, or was already used. {_START_OVER}",
                status=400,
                tone="bad",
            )
        if "error" in query or "code" not in query:
            code = query.get("error", "")
            said = f" (it answered “{code}”)" if _ERROR_CODE.match(code) else ""
            text = f"The identity provider did not sign you in{said}. {_START_OVER}"
            return message("Not signed in", text, status=400, tone="bad")
        if await ctx.links.peek("approval", pending.link_token) is None:
            return message(*GONE, status=410, tone="bad")
        user = await self._exchange(query["code"], pending)
        if user is None:
            return message(
                "Not signed in",
                f"The identity provider's answer could not be used to sign you in. {_START_OVER}",
                status=502,
                tone="bad",
            )
        return await SESSION.start(ctx, user, f"/approvals/{pending.link_token}")

    async def _exchange(self, code: str, pending: PendingAuthorization) -> str | None:
        """The user the provider signed in: the code traded for an access token (with the PKCE
        verifier), validated as ``/mcp`` validates one. None if anything along the way fails."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "code_verifier": pending.verifier,
            "client_id": self.client_id,
            "resource": self.door.resource_url,
        }
        headers = {"Accept": "application/json"}
        sealed = await self.vault.sealed(FRONT_DOOR_SECRETS, principal=PROJECT_WIDE, name="approver")
        if sealed is not None:
            secret = sealed.open().reveal()
            if isinstance(secret, str):
                headers["Authorization"] = client_basic(self.client_id, secret)
        http = self.door.http
        if http is None:
            logger.warning("approver sign-in: the front door has no client for its identity provider")
            return None
        try:
            response = await http.post(self.door.endpoints.token or "", data=form, headers=headers, timeout=15.0)
            answer = response.json() if response.status_code == 200 else None
        except (httpx2.HTTPError, ValueError) as exc:
            logger.warning("approver sign-in: the token endpoint could not be used: %s", type(exc).__name__)
            return None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str):
            logger.warning("approver sign-in: the token endpoint answered %d without a token", response.status_code)
            return None
        try:
            access = await self.door.verify(token)
        except TokenRefused as refused:
            logger.info("approver sign-in: the provider's token was refused: %s", refused.code)
            return None
        principal = self.door.principal(access)
        return principal.user if principal is not None else None

    def routes(self) -> list[Route]:
        return [Route(CALLBACK_PATH, self.callback, methods=["GET"])]
