"""Human pages (SPEC 8): paste a credential, paste a named secret, approve or deny one call.

Plain server-rendered HTML, no JavaScript. Opening a link (GET) never consumes it, so a chat
client's link preview cannot burn it; the form's POST consumes it atomically. Every form carries
a CSRF token bound to its link, and a POST whose Origin is another site is refused. A page never
echoes a submitted secret, and nothing here logs form values.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from ..credentials import parse_secret_input
from ..errors import CredentialError
from ..gateway import Gateway
from ..links import hash_link_token
from ..store.base import LinkKind, LinkRecord

__all__ = ["web_routes"]

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
}


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    required: bool = True
    plain: bool = False
    multiline: bool = False


_SINGLE = (Field("secret", "Secret value"),)
FIELDS: dict[str, tuple[Field, ...]] = {
    "bearer": (Field("secret", "Token"),),
    "api_key": (Field("secret", "API key"),),
    "custom": _SINGLE,
    "hmac": (Field("secret", "Signing secret"),),
    "basic": (Field("username", "Username", plain=True), Field("password", "Password")),
    "oauth1": (
        Field("consumer_key", "Consumer key", plain=True),
        Field("consumer_secret", "Consumer secret"),
        Field("token", "Access token", plain=True),
        Field("token_secret", "Access token secret"),
    ),
    "aws_sigv4": (
        Field("access_key_id", "Access key ID", plain=True),
        Field("secret_access_key", "Secret access key"),
        Field("session_token", "Session token (optional)", required=False),
    ),
    "mtls": (
        Field("cert_pem", "Client certificate (PEM)", multiline=True),
        Field("key_pem", "Private key (PEM)", multiline=True),
    ),
    "oauth2": (Field("client_id", "Client ID", plain=True), Field("client_secret", "Client secret")),
}


def _page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = TEMPLATES.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status, headers=_SECURITY_HEADERS)


def _message(heading: str, message: str, *, status: int = 200, tone: str = "ok") -> HTMLResponse:
    return _page("message.html", status, title=heading, heading=heading, message=message, tone=tone)


_GONE = (
    "Link not valid",
    "This link has expired or was already used. Ask the agent for a new one.",
)


def web_routes(gateway: Gateway) -> list[Route]:
    page_key = secrets.token_bytes(32)

    def csrf_for(token: str) -> str:
        return hmac.new(page_key, hash_link_token(token).encode(), hashlib.sha256).hexdigest()

    def same_site(request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            return origin is None
        return origin.rstrip("/") in {gateway.links.public_origin, f"{request.url.scheme}://{request.url.netloc}"}

    async def form_guard(request: Request, token: str) -> Response | None:
        form = await request.form()
        if not same_site(request) or not hmac.compare_digest(str(form.get("csrf", "")), csrf_for(token)):
            return _message(
                "Request refused", "The form could not be verified. Open the link again.", status=403, tone="bad"
            )
        return None

    def fields_for(link: LinkRecord) -> tuple[Field, ...]:
        if link.kind == "secret" and link.secret_name != "default":
            return _SINGLE
        cfg = gateway.manifest.connector(link.connector)
        return FIELDS.get(cfg.auth.type if cfg else "bearer", _SINGLE)

    def credential_page(kind: LinkKind) -> Any:
        async def endpoint(request: Request) -> Response:
            token = request.path_params["token"]
            link = await gateway.links.peek(kind, token)
            cfg = gateway.manifest.connector(link.connector) if link else None
            if link is None or cfg is None:
                return _message(*_GONE, status=410, tone="bad")
            if request.method == "GET":
                named = link.kind == "secret" and link.secret_name != "default"
                return _page(
                    "credential.html",
                    title=f"Connect {cfg.display_name}",
                    heading=f"Connect {cfg.display_name}" if not named else f"Secret for {cfg.display_name}",
                    purpose="enter credentials" if not named else f"paste the secret “{link.secret_name}”",
                    connector=cfg.slug,
                    connector_name=cfg.display_name,
                    fields=fields_for(link),
                    csrf=csrf_for(token),
                    expires_at=link.expires_at.strftime("%Y-%m-%d %H:%M"),
                )
            if (refused := await form_guard(request, token)) is not None:
                return refused
            form = await request.form()
            fields = fields_for(link)
            values = {f.name: str(form.get(f.name, "")) for f in fields}
            kind_name = "bearer" if fields is _SINGLE else cfg.auth.type
            raw = values["secret"] if len(fields) == 1 else json.dumps({k: v for k, v in values.items() if v})
            try:
                value = parse_secret_input(kind_name, raw)
            except CredentialError as exc:
                return _message("Not saved", f"{exc} Go back and try again.", status=400, tone="bad")
            if await gateway.links.consume(kind, token) is None:
                return _message(*_GONE, status=410, tone="bad")
            await gateway.vault.put(link.connector, value, name=link.secret_name)
            return _message(
                "Saved", f"{cfg.display_name} is connected. You can close this page and return to the agent."
            )

        return endpoint

    async def approval_page(request: Request) -> Response:
        token = request.path_params["token"]
        link = await gateway.links.peek("approval", token)
        approval = await gateway.store.get_approval(link.approval_id) if link and link.approval_id else None
        if link is None or approval is None:
            return _message(*_GONE, status=410, tone="bad")
        if approval.status != "pending":
            return _message("Already decided", f"This call was already {approval.status}.", tone="bad")
        if request.method == "GET":
            why = f"{approval.verdict_source} policy" + (
                f" (rule {approval.verdict_rule})" if approval.verdict_rule else ""
            )
            return _page(
                "approval.html",
                title="Approve call",
                approval=approval,
                why=why,
                csrf=csrf_for(token),
                expires_at=approval.expires_at.strftime("%Y-%m-%d %H:%M"),
            )
        if (refused := await form_guard(request, token)) is not None:
            return refused
        decision = str((await request.form()).get("decision", ""))
        if decision not in ("approve", "deny") or await gateway.links.consume("approval", token) is None:
            return _message(*_GONE, status=410, tone="bad")
        decided = await gateway.approvals.decide(approval.id, decision == "approve")
        if decided is None:
            return _message("Already decided", "This call was already decided or has expired.", tone="bad")
        if decision == "approve":
            return _message("Approved", "The agent may now run this call once. You can close this page.")
        return _message("Denied", "The call will not run. You can close this page.", tone="bad")

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok", "audit_failures": gateway.auditor.failures})

    return [
        Route("/healthz", healthz),
        Route("/connect/{token}", credential_page("connect"), methods=["GET", "POST"]),
        Route("/secrets/{token}", credential_page("secret"), methods=["GET", "POST"]),
        Route("/approvals/{token}", approval_page, methods=["GET", "POST"]),
    ]
