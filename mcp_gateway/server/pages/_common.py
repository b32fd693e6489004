"""What every human page shares: templates, security headers, CSRF tokens and the same-site check.

CSRF: a form carries ``HMAC(page key, binding)``, where the binding is what the form acts on (the
hash of the link token, or the operator's session). The page key is derived from the master key
(``Gateway.page_key``), so several instances behind a load balancer accept each other's forms; a
gateway built without one (tests) uses a random key of its own. Tokens are compared with
``hmac.compare_digest``. A POST whose ``Origin``
is another site is refused too, and cookies are ``SameSite=Strict``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from ...primitives.sanitize import reveal
from ...services.links import LinkService
from ...store.contract import EphemeralStore
from ...vocabulary.clock import Clock

__all__ = ["GONE", "TEMPLATES", "CookieSession", "PageContext", "approves", "digest", "message", "page"]

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent.parent / "templates"))
# ``text|revealed``: runs of plain text (False) and hidden characters shown as their codes (True), for
# any text an agent or an upstream chose (``sanitize.reveal``); templates mark the True runs.
TEMPLATES.env.filters["revealed"] = lambda text: reveal("" if text is None else str(text))
MAX_FORM_BYTES = 256 * 1024
"""A form larger than this is refused before it is parsed (two PEM files fit many times over)."""
MAX_PART_BYTES = 64 * 1024

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'{extra}"
_HEADERS = {
    "Cache-Control": "no-store",
    # Not no-referrer: under it browsers send ``Origin: null`` even on a same-origin form POST, so the
    # same-site check could not tell our own forms from a sandboxed attacker's. same-origin still sends
    # no Referer (with a link token in its path) to any other site, the OAuth2 provider included.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}


def security_headers(*, form_targets: tuple[str, ...] = ()) -> dict[str, str]:
    """Headers for every page. ``form_targets``: other origins a form may lead to (CSP ``form-action``
    also governs the redirects after a submission, so an OAuth2 start page must name its provider)."""
    extra = "".join(f" {origin}" for origin in form_targets)
    return {**_HEADERS, "Content-Security-Policy": _CSP.format(extra=extra)}


def page(
    name: str,
    status: int = 200,
    *,
    form_targets: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    html = TEMPLATES.get_template(name).render(**context)
    return HTMLResponse(
        html, status_code=status, headers={**security_headers(form_targets=form_targets), **(headers or {})}
    )


def message(heading: str, text: str, *, status: int = 200, tone: str = "ok") -> HTMLResponse:
    return page("message.html", status, title=heading, heading=heading, message=text, tone=tone)


def approves(form: FormData) -> bool | HTMLResponse:
    """The form's Approve (True) or Deny (False) button, or the 400 page for anything else."""
    decisions = form.getlist("decision")
    decision = decisions[0] if len(decisions) == 1 else None  # two buttons at once decide nothing
    if decision not in ("approve", "deny"):
        return message("Request refused", "Choose Approve or Deny.", status=400, tone="bad")
    return decision == "approve"


GONE = ("Link not valid", "This link has expired or was already used. Ask the agent for a new one.")
REFUSED = ("Request refused", "The form could not be verified. Open the link again and resubmit.")


@dataclass
class PageContext:
    """What every page shares: the links (the public address; each link page peeks and consumes its
    own), the clock, the short-lived rows browser sessions live in, and the page key (the
    gateway's, else a random one)."""

    links: LinkService
    clock: Clock
    sessions: EphemeralStore
    key: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        if not self.key:
            self.key = secrets.token_bytes(32)

    def csrf(self, binding: str) -> str:
        return hmac.new(self.key, b"csrf\0" + binding.encode(), hashlib.sha256).hexdigest()

    def same_site(self, request: Request) -> bool:
        """No ``Origin`` (a non-browser client), or ours: the public URL's origin or the one requested."""
        origin = request.headers.get("origin")
        if origin is None:
            return True
        allowed = {self.links.public_origin, f"{request.url.scheme}://{request.url.netloc}"}
        return origin.rstrip("/") in allowed

    async def form(self, request: Request, binding: str) -> FormData | Response:
        """The submitted form if it is same-site and carries this binding's CSRF token, else the page
        that refuses it. Oversized or malformed bodies are refused without being read in full."""
        refused = message(*REFUSED, status=403, tone="bad")
        if not self.same_site(request):
            return refused
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_FORM_BYTES):
            return message("Too large", "The form is larger than the gateway accepts (256 KB).", status=413, tone="bad")
        try:
            form = await request.form(max_files=4, max_fields=32, max_part_size=MAX_PART_BYTES)
        except HTTPException:
            return message("Not saved", "The form could not be read (a field is too large?).", status=400, tone="bad")
        if not hmac.compare_digest(str(form.get("csrf", "")), self.csrf(binding)):
            return refused
        return form


def digest(value: str) -> str:
    """How a random browser secret (a session cookie, an OAuth ``state``) is kept in the store."""
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True)
class CookieSession:
    """A browser session: 256 random bits in an ``HttpOnly`` cookie, kept in the store as their
    SHA-256 (never the cookie) with who signed in, so every instance behind a load balancer knows it."""

    kind: str
    """The ``Store`` ephemeral kind of its rows."""
    cookie: str
    ttl: timedelta
    path: str
    samesite: Literal["lax", "strict"]

    def key(self, request: Request) -> str | None:
        """The store key of this request's session cookie, if it carries a plausible one."""
        cookie = request.cookies.get(self.cookie)
        return digest(cookie) if cookie and len(cookie) <= 128 else None

    async def who(self, ctx: PageContext, request: Request) -> tuple[str, str] | None:
        """(who, store key) of the live session this request carries, if any."""
        key = self.key(request)
        found = None if key is None else await ctx.sessions.get_ephemeral(self.kind, key, ctx.clock.now())
        return None if found is None or key is None else (found.decode(), key)

    async def start(self, ctx: PageContext, who: str, location: str) -> Response:
        """Sign this browser in as ``who`` and send it on to ``location``."""
        now = ctx.clock.now()
        cookie = secrets.token_urlsafe(32)
        # 256 random bits: a clash with a live session is not a case to handle.
        await ctx.sessions.put_ephemeral(self.kind, digest(cookie), who.encode(), now + self.ttl, now)
        response = RedirectResponse(location, status_code=303, headers=security_headers())
        response.set_cookie(
            self.cookie,
            cookie,
            max_age=int(self.ttl.total_seconds()),
            path=self.path,
            httponly=True,
            samesite=self.samesite,
            secure=ctx.links.public_url.startswith("https://"),
        )
        return response

    async def end(self, ctx: PageContext, request: Request, location: str) -> Response:
        """Forget this request's session and send the browser on to ``location`` without its cookie."""
        key = self.key(request)
        if key is not None:
            await ctx.sessions.delete_ephemeral(self.kind, key)
        response = RedirectResponse(location, status_code=303, headers=security_headers())
        secure = ctx.links.public_url.startswith("https://")
        response.delete_cookie(self.cookie, path=self.path, httponly=True, samesite=self.samesite, secure=secure)
        return response
