"""``/oauth/callback``: where the provider sends the human back after an authorization code sign-in.

The ``state`` must be one the gateway handed out (looked up by its hash, usable once, for ten
minutes, bound to one connect link). The code is exchanged with the PKCE verifier, the link is
consumed, and the token set is sealed in the vault. Nothing from the query is echoed: a provider
error is shown only as its RFC 6749 error code, when it looks like one.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...auth.oauth2 import CALLBACK_PATH, AuthorizationRefused
from ...core.credential_desk import CredentialDesk
from ...manifest import OAuth2Auth
from ...vocabulary.errors import CredentialMissing, StoreUnavailable, UpstreamError
from ._common import GONE, PageContext, message
from .credential_page import STORED, Configured, not_stored, replaced_meanwhile, unrecorded

__all__ = ["OAuthCallback"]

logger = logging.getLogger(__name__)

_ERROR_CODE = re.compile(r"^[a-z_]{1,40}$")
_START_OVER = "Open the connect link again to retry, or ask the agent for a new one."
_NOT_APPROVED = (
    "Not connected",
    "This sign-in would replace the team-wide connection every user's calls use, and an operator has not "
    "approved that (or no longer does). Nothing was changed.",
)


@dataclass(frozen=True)
class OAuthCallback:
    """``CALLBACK_PATH``: an OAuth2 authorization code sign-in, completed."""

    ctx: PageContext
    gateway: Configured
    credentials: CredentialDesk

    def routes(self) -> list[Route]:
        return [Route(CALLBACK_PATH, self.callback, methods=["GET"])]

    async def callback(self, request: Request) -> Response:
        spent: list[tuple[str, datetime]] = []
        try:
            return await self._complete(request, spent)
        except Exception as exc:
            # The sign-in's state is used up, and its code at the provider: this callback cannot be
            # reloaded. Once the connect link was used, it is given back (compare-and-set on the instant
            # it was used), so opening it again signs in afresh; before that, it was never spent.
            if not isinstance(exc, StoreUnavailable):
                logger.exception("completing an OAuth2 sign-in failed")
            for token, used_at in spent:
                await self.ctx.links.give_back(token, used_at)
            return not_stored(exc, heading="Not connected", again="sign in again")

    async def _complete(self, request: Request, spent: list[tuple[str, datetime]]) -> Response:
        query = request.query_params
        pending = await self.credentials.oauth2.take(query.get("state", ""))
        if pending is None:
            return message(
                "Sign-in not recognised",
                "This sign-in does not belong to a connect link the gateway handed out, or it took longer than "
                f"ten minutes, or it was already completed. {_START_OVER}",
                status=400,
                tone="bad",
            )
        cfg = self.gateway.manifest.connector(pending.connector)
        if cfg is None or not isinstance(cfg.auth, OAuth2Auth):
            return message(*GONE, status=410, tone="bad")
        name = cfg.display_name
        if "error" in query or "code" not in query:
            code = query.get("error", "")
            said = f" (it answered “{code}”)" if _ERROR_CODE.match(code) else ""
            return message("Not connected", f"{name} did not grant access{said}. {_START_OVER}", status=400, tone="bad")
        link = await self.ctx.links.peek("connect", pending.link_token)
        if link is None:
            return message(*GONE, status=410, tone="bad")  # completed meanwhile through another attempt
        if not (await self.credentials.permit(link, cfg)).may_save:
            return message(*_NOT_APPROVED, status=403, tone="bad")
        try:
            token_set = await self.credentials.oauth2.exchange(cfg.auth, pending, query["code"])
        except AuthorizationRefused as exc:
            return message("Not connected", f"{exc}. {_START_OVER}", status=400, tone="bad")
        except UpstreamError as exc:
            return message("Not connected", f"{exc}.", status=502, tone="bad")
        except CredentialMissing:
            return message(
                "Not connected", f"The client credentials of {name} are gone. {_START_OVER}", status=409, tone="bad"
            )
        # Consumed only now: an attempt abandoned at the provider leaves the link usable for another.
        used_at = self.ctx.clock.now()
        spent.append((pending.link_token, used_at))  # given back if the store fails from here on
        if await self.ctx.links.consume("connect", pending.link_token, at=used_at) is None:
            return message(*GONE, status=410, tone="bad")
        # A per_user connector's token set is the linked user's own (the link is bound to them), else
        # the team's: replacing one takes an operator's approval, spent here.
        permit = await self.credentials.permit(link, cfg, consume=True)
        if not permit.may_save:
            return message(*_NOT_APPROVED, status=403, tone="bad")
        saved = await self.credentials.save_token_set(link, permit, token_set, via="connect")
        if saved == "replaced_meanwhile":
            return replaced_meanwhile(cfg, await self.credentials.origin(permit))
        if saved not in STORED:
            return message(
                "Not connected",
                f"Someone connected {name} for the whole team while this sign-in was under way, and this link was "
                "given to connect it, not to replace that. Nothing was changed. Ask the agent for a new link: "
                "replacing the team's connection needs an operator's approval.",
                status=409,
                tone="bad",
            )
        return message(
            "Connected", f"{name} is connected.{unrecorded(saved)} You can close this page and return to the agent."
        )
