"""Connect and secret pages: a human enters a connector's credential, in the shape its auth kind needs.

One form per shape (``FIELDS``): a single value (bearer, api_key, custom, hmac), basic, oauth1,
a ``custom`` connector whose header templates read fields of a JSON secret (one box per field),
aws_sigv4 (the region and service are the manifest's, shown read-only), mtls (PEM pasted or
uploaded) and the OAuth2 client. Opening a link (GET) never consumes it, so a chat client's
link preview cannot burn it; a valid submission consumes it atomically, then stores the value
through the vault. An invalid submission shows the form again with what is wrong, never with
what was typed, and leaves the link usable.

An OAuth2 authorization code connector gets a start page instead: it asks for the client's
credentials only when none are stored, then sends the human to the provider (``oauth.py`` takes
them back).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...auth.custom import template_fields
from ...auth.oauth2 import CALLBACK_PATH, AuthorizationRefused
from ...auth.secret_check import over_http, unusable
from ...core.credential_changes import Permit
from ...core.credential_desk import CredentialDesk, Saved
from ...core.credential_origins import CredentialOrigin
from ...manifest import AwsSigV4Auth, ConnectorConfig, CustomAuth, Manifest, MtlsAuth, OAuth2Auth
from ...primitives.secrets import PROJECT_WIDE, CredentialKey, parse_secret_input
from ...store.contract import LinkKind, LinkRecord
from ...vocabulary.errors import CredentialError, StoreUnavailable, UpstreamError
from ...vocabulary.model import AuthKind
from ._common import GONE, MAX_PART_BYTES, PageContext, message, page, security_headers

logger = logging.getLogger(__name__)

__all__ = ["FIELDS", "Configured", "CredentialPages", "Field"]


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    required: bool = True
    plain: bool = False
    """An identifier, not a secret: shown as typed (a username, a client id)."""
    multiline: bool = False
    upload: bool = False
    """May also be uploaded as a file (PEM)."""
    hint: str = ""


_SINGLE = (Field("secret", "Secret value"),)
_FIELD_PREFIX = "secret."
"""A ``custom`` connector's form names each templated field so: no field's name meets the form's own."""
_OAUTH2_CLIENT = (
    Field("client_id", "Client ID", plain=True),
    Field("client_secret", "Client secret"),
)
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
        Field("session_token", "Session token (optional)", required=False, hint="Only for temporary credentials."),
    ),
    "mtls": (
        Field(
            "cert_pem",
            "Client certificate (PEM)",
            multiline=True,
            upload=True,
            hint="Paste it, or choose the file. Include intermediate certificates after it, if any.",
        ),
        Field(
            "key_pem",
            "Private key (PEM, unencrypted)",
            multiline=True,
            upload=True,
            hint="Paste it, or choose the file.",
        ),
    ),
    "oauth2": _OAUTH2_CLIENT,
}


def _fields(link: LinkRecord, cfg: ConnectorConfig) -> tuple[tuple[Field, ...], AuthKind]:
    """The form's fields and the secret shape they are parsed as."""
    if link.kind == "secret" and link.secret_name != "default":
        return _SINGLE, "bearer"  # a named secret is one plain value
    kind = cfg.auth.type
    if isinstance(cfg.auth, CustomAuth):
        # One box per field the header templates read ({secret.user}, {secret.pass}): a single box would
        # take one value where the connector needs each of them.
        fields, whole = template_fields(cfg.auth.headers.values())
        if fields and not whole:
            return tuple(Field(_FIELD_PREFIX + f, f) for f in fields), kind
    return FIELDS.get(kind, _SINGLE), kind if kind in FIELDS else "bearer"


def _settings(cfg: ConnectorConfig) -> list[tuple[str, str]]:
    """The manifest's non-secret settings a human may want to check against what they paste."""
    auth = cfg.auth
    if isinstance(auth, AwsSigV4Auth):
        return [("Region", auth.region), ("Service", auth.service)]
    if isinstance(auth, OAuth2Auth):
        rows = [("Token endpoint", auth.token_url)]
        return [*rows, ("Scopes", " ".join(auth.scopes))] if auth.scopes else rows
    if isinstance(auth, MtlsAuth) and cfg.ca_file:
        # Whether the server is checked against the operator's CA, not where that file lives: a
        # server-side path is not for whoever holds the link.
        return [("Trusted server CA", "the operator's own (not the system's)")]
    return []


async def _values(form: FormData, fields: tuple[Field, ...]) -> dict[str, str] | str:
    """What was submitted, by field (an upload wins over pasted text); a message when a file is unusable."""
    values: dict[str, str] = {}
    for f in fields:
        text = form.get(f.name)
        upload = form.get(f"{f.name}_file") if f.upload else None
        if isinstance(upload, UploadFile) and upload.filename:
            data = await upload.read(MAX_PART_BYTES + 1)
            if len(data) > MAX_PART_BYTES:
                return f"The file for “{f.label}” is larger than 64 KB; is it the right file?"
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return f"The file for “{f.label}” is not a text (PEM) file."
        values[f.name] = (
            text.strip() if isinstance(text, str) and f.multiline else (text if isinstance(text, str) else "")
        )
    return values


def _parse(kind: AuthKind, values: dict[str, str], cfg: ConnectorConfig) -> Any:
    """The secret as the vault stores it; raises ``CredentialError`` (never quoting the input)."""
    if "secret" in values and len(values) == 1:
        return parse_secret_input(kind, values["secret"], over_http=over_http(cfg))
    fields = {k.removeprefix(_FIELD_PREFIX): v for k, v in values.items() if v}
    return parse_secret_input(kind, json.dumps(fields), over_http=over_http(cfg))


_VIA: dict[LinkKind, str] = {"connect": "connect", "secret": "request_secret", "approval": "approval"}


def _scope(link: LinkRecord, permit: Permit) -> dict[str, Any]:
    """What the page says about the credential: team-wide or personal, and what saving replaces."""
    approval = permit.approval
    return {
        "scope": permit.scope,
        "replaces": permit.replaces,
        "owner": link.principal,
        "approved_by": approval.decided_by if approval is not None and permit.state == "approved" else None,
    }


def not_now(cfg: ConnectorConfig, permit: Permit, *, post: bool) -> Response:
    """The page of a link that may not store its value (yet): it would replace a team-wide credential."""
    name = cfg.display_name
    approval = permit.approval
    match permit.state:
        case "waiting" if approval is not None:
            return message(
                "Waiting for an operator",
                f"Saving here would replace the team-wide credential of {name}, which every user's calls carry, "
                f"so an operator must approve it first (approval {approval.id}: on the operator overview, or "
                f"mcp-gateway approvals approve {approval.id}).{_stored_now(permit)} Nothing was changed. Open this "
                "link again once it is approved.",
                status=409 if post else 200,
                tone="bad",
            )
        case "moved" if approval is not None:
            return message(
                "Not saved",
                f"An operator approved replacing the team-wide credential of the connector that sent it to "
                f"{approval.calls}; {cfg.slug} is configured to send it elsewhere now (it moved, or another API "
                "took its name), so that approval does not cover it. Nothing was changed. Ask the agent for a new "
                "link: it will ask an operator again.",
                status=409,
                tone="bad",
            )
        case "mode_changed":
            return message(
                "Not saved",
                f"This link was to replace the team-wide credential of {name}, and that is what an operator was "
                f"asked to approve; {name} now keeps each user's own credential instead (credentials: per_user), "
                "so saving here would store a personal one nobody approved. Nothing was changed. Ask the agent "
                "for a new link: it stores your own credential, with no approval needed.",
                status=409,
                tone="bad",
            )
        case "withdrawn":
            return message(
                "Link withdrawn",
                f"The agent that asked for this link has lost access to {name} since (its token was revoked, or it "
                "is no longer granted this connector). Nothing was changed. If it is still needed, ask for a new link.",
                status=403,
                tone="bad",
            )
        case "overtaken" if permit.origin is not None and not permit.origin.replaced:
            return message(
                "Approval withdrawn",
                f"The operator approved replacing the team-wide credential of {name}, but that credential was "
                "deleted since, which withdrew the approval; then a new one was "
                f"{permit.origin.told()}. Nothing was changed. If yours is still needed, ask the agent for a new "
                "link.",
                status=409,
                tone="bad",
            )
        case "overtaken":
            return replaced_meanwhile(cfg, permit.origin)
        case "unapproved":
            return message(
                "Needs an operator",
                f"{name} now has a team-wide credential, which every user's calls carry; this link cannot replace it "
                f"without an operator's approval.{_stored_now(permit)} Nothing was changed. Ask the agent for a new "
                "link: it will ask an operator to approve the replacement.",
                status=409,
                tone="bad",
            )
        case "expired" if approval is not None:
            approved = (
                f"An operator approved replacing the team-wide credential of {name}, but the approval expired"
                if approval.decided_by is not None
                else f"The request to replace the team-wide credential of {name} expired before an operator approved it"
            )
            return message(
                "Approval expired",
                f"{approved} (at {approval.expires_at:%Y-%m-%d %H:%M} UTC), before this link was used. Nothing was "
                "changed. If it is still needed, ask the agent for a new link: it will ask an operator again.",
                status=403,
                tone="bad",
            )
        case _ if permit.approval is not None and permit.approval.status == "consumed":
            # Two links of one request (connect and request_secret) share its approval: it covers one
            # replacement, which the other link made.
            return message(
                "Already replaced",
                f"The operator's approval to replace the team-wide credential of {name} was used by another link "
                "of the same request: the credential was replaced there. Nothing was changed here. If it must be "
                "replaced again, ask the agent for a new link.",
                status=409,
                tone="bad",
            )
        case _:
            return message(
                "Not approved",
                f"Replacing the team-wide credential of {name} was not approved by an operator (denied, expired, "
                "or not for this link). Nothing was changed.",
                status=403,
                tone="bad",
            )


class Configured(Protocol):
    """What the credential pages read of the gateway: the manifest in force (a reload replaces it)."""

    @property
    def manifest(self) -> Manifest: ...


@dataclass(frozen=True)
class _Opened:
    """A link that may store its value, as its page acts on it."""

    kind: LinkKind
    token: str
    link: LinkRecord
    cfg: ConnectorConfig
    permit: Permit


@dataclass(frozen=True)
class CredentialPages:
    """``/connect/{token}`` and ``/secrets/{token}``: GET shows the form (or the OAuth2 start page),
    POST stores what was entered."""

    ctx: PageContext
    gateway: Configured
    credentials: CredentialDesk

    def routes(self) -> list[Route]:
        return [
            Route("/connect/{token}", self.connect, methods=["GET", "POST"]),
            Route("/secrets/{token}", self.secret, methods=["GET", "POST"]),
        ]

    async def connect(self, request: Request) -> Response:
        return await self._link_page("connect", request)

    async def secret(self, request: Request) -> Response:
        return await self._link_page("secret", request)

    async def _link_page(self, kind: LinkKind, request: Request) -> Response:
        token = request.path_params["token"]
        # Only POST saves: HEAD, which starlette routes here beside GET, is a look like GET.
        saving = request.method == "POST"
        link = await self.ctx.links.peek(kind, token)
        cfg = self.gateway.manifest.connector(link.connector) if link else None
        if link is None:
            return message(*GONE, status=410, tone="bad")
        if cfg is None:
            return message(
                "Link not valid",
                f"This link was for the connector “{link.connector}”, which is no longer configured on this gateway. "
                "Nothing was changed.",
                status=410,
                tone="bad",
            )
        permit = await self.credentials.permit(link, cfg)
        if not permit.may_save:
            return not_now(cfg, permit, post=saving)
        opened = _Opened(kind, token, link, cfg, permit)
        auth = cfg.auth
        code_flow = (
            auth if kind == "connect" and isinstance(auth, OAuth2Auth) and auth.flow == "authorization_code" else None
        )
        if not saving:
            if code_flow is not None:
                return await self._oauth2_start_page(opened, code_flow)
            return self._form_page(opened)
        form = await self.ctx.form(request, link.token_hash)
        if isinstance(form, Response):
            return form
        if code_flow is not None:
            return await self._oauth2_start(opened, code_flow, form)
        return await self._submit(opened, form)

    async def _submit(self, opened: _Opened, form: FormData) -> Response:
        """Check what was entered, then store it (consuming the link); the form again if it is wrong."""
        link, cfg = opened.link, opened.cfg
        fields, shape = _fields(link, cfg)
        values = await _values(form, fields)
        if isinstance(values, str):
            return self._form_page(opened, error=values, status=400)
        missing = [f.label for f in fields if f.required and not values.get(f.name)]
        if missing:
            return self._form_page(opened, error=f"Not saved: fill in {', '.join(missing)}.", status=400)
        try:
            value = _parse(shape, values, cfg)
        except CredentialError as exc:
            return self._form_page(opened, error=f"Not saved: {exc}.", status=400)
        if shape == cfg.auth.type and (problem := unusable(cfg.auth, value)):
            return self._form_page(opened, error=f"Not saved: {problem}", status=400)
        auth = cfg.auth
        if shape == "oauth2" and isinstance(auth, OAuth2Auth) and auth.flow == "client_credentials":
            assert isinstance(value, dict)
            return await self._client_credentials(opened, auth, value)
        # Where it goes: a per_user connector's credential is the linked user's own, else the team's;
        # a connector whose sync needed it loads now.
        saved = await self._spend_and_save(opened, value, forget_tokens=isinstance(auth, OAuth2Auth))
        if not isinstance(saved, str):
            return saved
        done = (
            f"The secret “{link.secret_name}” for {cfg.display_name} is saved."
            if link.secret_name != "default"
            else f"{cfg.display_name} is connected."
        )
        return message("Saved", f"{done}{unrecorded(saved)} You can close this page and return to the agent.")

    async def _spend_and_save(
        self, opened: _Opened, value: str | dict[str, str], *, forget_tokens: bool
    ) -> Response | Saved:
        """Consume the link (its use is what stops a second submission), then its approval if it has
        one, then store the value (``CredentialDesk.save``): how it was saved once stored, else the page
        saying why not. When the store fails before the value is stored, the link is given back, so "try
        again" is true; once it is stored, the desk no longer raises (the link stays used)."""
        used_at = self.ctx.clock.now()
        try:
            if await self.ctx.links.consume(opened.kind, opened.token, at=used_at) is None:
                return message(*GONE, status=410, tone="bad")
            permit = await self.credentials.permit(opened.link, opened.cfg, consume=True)
            if not permit.may_save:
                return not_now(opened.cfg, permit, post=True)
            stored = await self.credentials.save(
                opened.link, permit, value, via=_VIA[opened.kind], forget_tokens=forget_tokens
            )
        except Exception as exc:
            # Whatever failed after the link was used, the value is not stored. The consumption may have
            # been committed though its answer was lost: the link is given back all the same
            # (compare-and-set on the instant, so never another submission's), now or on the next visit,
            # so the human who typed it can enter it again instead of being told the link was used.
            if not isinstance(exc, StoreUnavailable):
                logger.exception("saving a credential for %s through a link failed", opened.cfg.slug)
            await self.ctx.links.give_back(opened.token, used_at)
            return not_stored(exc, heading="Not saved", again="enter the value again")
        if stored == "replaced_meanwhile":
            return replaced_meanwhile(opened.cfg, await self.credentials.origin(permit))
        if stored == "added_meanwhile":
            return _stored_meanwhile(opened.cfg, await self.credentials.origin(permit))
        return stored

    def _form_page(self, opened: _Opened, *, error: str | None = None, status: int = 200) -> Response:
        link, cfg = opened.link, opened.cfg
        fields, _ = _fields(link, cfg)
        named = link.kind == "secret" and link.secret_name != "default"
        return page(
            "credential.html",
            status,
            title=f"Connect {cfg.display_name}" if not named else f"Secret for {cfg.display_name}",
            heading=f"Connect {cfg.display_name}" if not named else f"A secret for {cfg.display_name}",
            purpose="enter the credentials" if not named else f"paste the secret “{link.secret_name}”",
            connector=cfg.slug,
            connector_name=cfg.display_name,
            auth_kind=cfg.auth.type if not named else "secret",
            fields=fields,
            settings=[] if named else _settings(cfg),
            multipart=any(f.upload for f in fields),
            csrf=self.ctx.csrf(link.token_hash),
            error=error,
            expires_at=link.expires_at.strftime("%Y-%m-%d %H:%M"),
            **_scope(link, opened.permit),
        )

    async def _client_credentials(self, opened: _Opened, auth: OAuth2Auth, value: dict[str, str]) -> Response:
        """An OAuth2 client-credentials client: checked at the token endpoint before it is stored."""
        cfg = opened.cfg
        try:
            await self.credentials.oauth2.check_client(auth, cfg.slug, value)
        except AuthorizationRefused as exc:
            return self._form_page(opened, error=f"Not saved: {exc}. Check the client ID and secret.", status=400)
        except UpstreamError as exc:
            return self._form_page(opened, error=f"Not saved: {exc}.", status=502)
        saved = await self._spend_and_save(opened, value, forget_tokens=True)
        if not isinstance(saved, str):
            return saved
        return message(
            "Connected",
            f"{cfg.display_name} is connected.{unrecorded(saved)} You can close this page and return to the agent.",
        )

    async def _oauth2_start_page(
        self, opened: _Opened, auth: OAuth2Auth, *, error: str | None = None, status: int = 200
    ) -> Response:
        link, cfg = opened.link, opened.cfg
        needs_client = await self.credentials.sealed(cfg.slug, principal=link.principal) is None
        provider = httpx2.URL(auth.authorize_url or "")
        return page(
            "oauth_start.html",
            status,
            form_targets=(f"{provider.scheme}://{provider.netloc.decode()}",),
            title=f"Connect {cfg.display_name}",
            heading=f"Connect {cfg.display_name}",
            connector=cfg.slug,
            connector_name=cfg.display_name,
            provider=provider.host,
            scopes=auth.scopes,
            fields=_OAUTH2_CLIENT if needs_client else (),
            redirect_uri=f"{self.ctx.links.public_url}{CALLBACK_PATH}",
            csrf=self.ctx.csrf(link.token_hash),
            error=error,
            expires_at=link.expires_at.strftime("%Y-%m-%d %H:%M"),
            **_scope(link, opened.permit),
        )

    async def _oauth2_start(self, opened: _Opened, auth: OAuth2Auth, form: FormData) -> Response:
        """Off to the provider; the project's OAuth2 client is stored first when none is yet."""
        link, cfg = opened.link, opened.cfg
        client_id = await self.credentials.oauth2_client_id(cfg.slug, principal=link.principal)
        if client_id is None:
            values = await _values(form, _OAUTH2_CLIENT)
            value: Any = None
            try:
                value = _parse("oauth2", values, cfg) if isinstance(values, dict) else None
            except CredentialError as exc:
                values = str(exc)
            if not isinstance(value, dict):
                return await self._oauth2_start_page(opened, auth, error=str(values), status=400)
            # The project's OAuth app, stored only while none is: nothing is replaced.
            client_key = CredentialKey(connector=cfg.slug, principal=PROJECT_WIDE, name="default")
            client = Permit(client_key, None, "open")
            if await self.credentials.save(link, client, value, via="connect", reload=False) not in STORED:
                return _stored_meanwhile(cfg, await self.credentials.origin(client))
            client_id = value["client_id"]
        elif not client_id:
            return message(
                "Cannot connect",
                f"The stored client credentials of {cfg.display_name} are not an OAuth2 client id and secret. "
                "Ask the operator to store them again (mcp-gateway secret set).",
                status=409,
                tone="bad",
            )
        url = await self.credentials.oauth2.begin(
            auth,
            connector=cfg.slug,
            principal=link.principal,
            client_id=client_id,
            link_token=opened.token,
            redirect_uri=f"{self.ctx.links.public_url}{CALLBACK_PATH}",
            link_expires_at=link.expires_at,
        )
        return RedirectResponse(url, status_code=303, headers=security_headers())


def replaced_meanwhile(cfg: ConnectorConfig, origin: CredentialOrigin | None) -> Response:
    """The page of a replacement that came too late: the credential it was asked (or approved) to
    replace was replaced since, by someone else's approved link or the operator."""
    by = f" It was {origin.told()}." if origin is not None else ""
    return message(
        "Not saved",
        f"The team-wide credential of {cfg.display_name} was replaced meanwhile, after this replacement of the "
        f"one stored then was asked for.{by} Nothing was changed here, so no approval covers overwriting a "
        "value the operator never saw proposed. If yours is still needed, ask the agent for a new link.",
        status=409,
        tone="bad",
    )


STORED: tuple[Saved, ...] = ("saved", "saved_unrecorded")
"""How a save ends when the value is stored."""


def unrecorded(saved: Saved) -> str:
    """What a page adds when the value was stored but its record or audit row was not written."""
    if saved != "saved_unrecorded":
        return ""
    return (
        " The gateway could not finish writing down who stored it and when (its record or audit log may lack "
        "this change); its operator's log says so, and nothing needs doing on your side."
    )


def not_stored(exc: BaseException, *, heading: str, again: str) -> Response:
    """The page for a link whose save failed once the link was used (and given back, so it works again):
    nothing was saved, and when opening the link again can help (``again``: what the human does then).
    Soon for a database that stopped answering or is busy for a moment; once the operator says so for
    storage that refuses until someone fixes it (``StoreUnavailable.lasting``: a read-only standby, a
    full disk); and for any other failure, once more, then tell the operator."""
    if isinstance(exc, StoreUnavailable) and exc.lasting:
        text = (
            "The gateway's database refuses to store anything until its operator fixes it (the gateway's log "
            "says what is wrong). Nothing was saved; this link still works: open it again once the operator "
            f"says the gateway is fixed, and {again}."
        )
        return message(heading, text, status=503, tone="bad")
    if isinstance(exc, StoreUnavailable):
        text = (
            "The gateway's database stopped answering (or was busy) while this was being saved. Nothing was "
            f"saved; this link still works: open it again in a few seconds and {again}. (If the gateway "
            "restarted meanwhile and the page says the link was already used, ask the agent for a new link.)"
        )
        return message(heading, text, status=503, tone="bad")
    text = (
        f"The gateway failed while saving this. Nothing was saved; this link still works: open it again and "
        f"{again}. If it fails again, tell the gateway's operator (its log says why)."
    )
    return message(heading, text, status=500, tone="bad")


def _stored_now(permit: Permit) -> str:
    """ " The one stored now was replaced at … by …", when the record says."""
    return f" The one stored now was {permit.origin.told()}." if permit.origin is not None else ""


def _stored_meanwhile(cfg: ConnectorConfig, origin: CredentialOrigin | None = None) -> Response:
    by = f" (it was {origin.told()})" if origin is not None else ""
    return message(
        "Not saved",
        f"Someone stored a team-wide credential for {cfg.display_name} while this page was open{by}, and this link "
        "was given to add one, not to replace it. Nothing was changed. Ask the agent for a new link: replacing "
        "the team's credential needs an operator's approval.",
        status=409,
        tone="bad",
    )
