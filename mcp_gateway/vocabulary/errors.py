"""Anticipated failures, each carrying what the agent or operator should do next.

    GatewayError                 anticipated; ``str(exc)`` is safe to show (never holds a secret)
    ├── ManifestError            a manifest that cannot be read or validated (file:line: field: fix)
    ├── SourceError              a source that cannot be normalized (the connector gets status=error)
    ├── CredentialMissing        no credential stored for a connector that needs one (-> needs_auth)
    │   └── AuthorizationEnded   the OAuth2 provider ended a sign-in (``invalid_grant``); it was forgotten
    ├── CredentialError          a stored credential cannot be decrypted or has the wrong shape
    │   └── StoredSecretMisfit   a stored value lacks what its connector's auth reads (a template's field)
    ├── UnsupportedAuth          an auth kind this build cannot apply yet
    ├── ArgumentError            arguments that cannot be placed on the wire (-> invalid_args)
    ├── UpstreamError            the upstream failed, timed out, redirected off-origin or answered garbage
    ├── StoreUnopenable          the state database cannot be opened at all (the command line exits 3)
    │   └── StateUnwritable      the state folder, or the database file in it, cannot be created
    └── StoreUnavailable         the state database cannot be reached right now (-> store_unavailable, 503)

Anything else that escapes the core is a bug: the gateway turns it into a generic
``internal_error`` naming only the action, and logs the traceback to stderr.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ErrorReason

__all__ = [
    "ArgumentError",
    "AuthorizationEnded",
    "CredentialError",
    "CredentialMissing",
    "GatewayError",
    "Issue",
    "ManifestError",
    "SourceError",
    "StateUnwritable",
    "StoreUnavailable",
    "StoreUnopenable",
    "StoredSecretMisfit",
    "UnsupportedAuth",
    "UpstreamError",
]


class GatewayError(Exception):
    """Base of every anticipated failure. The message is written for the reader, with a next step."""

    withheld: str | None = None
    """An upstream's own words that the message withheld because they read as instructions to the
    model: redacted and cleaned, with the flags, for the operator's review only (never an agent's
    result, a table or a log line). Set by ``upstream_text.Screened.attach``."""


@dataclass(frozen=True)
class Issue:
    """One located problem in a manifest or spec file."""

    file: str
    line: int | None
    field: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text


class ManifestError(GatewayError):
    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


class SourceError(GatewayError):
    """A connector's source could not be read or normalized; only that connector is affected."""


class CredentialMissing(GatewayError):
    def __init__(self, connector: str, name: str = "default") -> None:
        self.connector = connector
        self.name = name
        super().__init__(f"no credential '{name}' is stored for connector '{connector}'")


class AuthorizationEnded(CredentialMissing):
    """The OAuth2 provider refused to renew a stored sign-in because the grant itself is dead
    (``invalid_grant``: revoked, expired, the user left), so the gateway forgot it. The message says so
    (never a token); the agent gets a connect link with it."""

    def __init__(self, connector: str, name: str, message: str) -> None:
        super().__init__(connector, name)
        self.args = (message,)


class CredentialError(GatewayError):
    """A stored credential is unusable (wrong key, tampered, wrong shape). Never carries the value."""


class StoredSecretMisfit(CredentialError):
    """A stored value that cannot fill its connector's templates (stored before they were checked, or by
    an older version): ``str(exc)`` says what it lacks, by field name, never a value. Only a human
    storing it again fixes it."""


class UnsupportedAuth(GatewayError):
    pass


MAX_ARGUMENT_ERRORS = 20
"""Errors an ``invalid_args`` answer lists; the rest are counted. A request with 200,000 misnamed
arguments is answered in a few lines, not in a list six times its own size."""
_FIELD_CHARS = 200


class ArgumentError(GatewayError):
    def __init__(self, message: str, errors: list[dict[str, str]] | None = None) -> None:
        listed = [
            {key: value[:_FIELD_CHARS] if key == "field" else value for key, value in error.items()}
            for error in (errors or [])[:MAX_ARGUMENT_ERRORS]
        ]
        if errors and len(errors) > MAX_ARGUMENT_ERRORS:
            listed.append({"field": "", "message": f"and {len(errors) - MAX_ARGUMENT_ERRORS:,} more"})
        self.errors = listed
        super().__init__(message)


class UpstreamError(GatewayError):
    def __init__(
        self,
        reason: ErrorReason,
        message: str,
        *,
        upstream_status: int | None = None,
        upstream_message: str | None = None,
        sent: bool = True,
        retry_after: float | None = None,
        broken: bool = False,
        forbidden: bool = False,
        drifted: bool = False,
    ) -> None:
        self.reason: ErrorReason = reason
        self.upstream_status = upstream_status
        self.upstream_message = upstream_message
        self.sent = sent
        """False when the request was refused before any of it left (it cannot have taken effect)."""
        self.retry_after = retry_after
        """Seconds the upstream asked to wait (its ``Retry-After``), when it said."""
        self.broken = broken
        """True when the upstream gave no usable HTTP answer (garbage, a cut body, a redirect loop): a
        failure of the upstream, as a 5xx is, for its circuit breaker."""
        self.forbidden = forbidden
        """True when the upstream refused the call as not permitted for the credential in a protocol's own
        words (GraphQL's ``FORBIDDEN`` over HTTP 200): final, told as a 403 is (``upstream_forbidden``)."""
        self.drifted = drifted
        """True when the upstream refused the request as naming a field, argument or type its schema lacks
        (a GraphQL validation error): the schema the catalog was built from may have changed since."""
        super().__init__(message)


class LinksUnavailable(GatewayError):
    """No link can be handed out: the pages it would open cannot be served where links point (another
    program holds that loopback port). Answered to the agent as an error saying what the operator fixes,
    never as a link to whoever listens there."""


class ToolsChanged(GatewayError):
    """An upstream MCP server lists other tools than its connector's catalog was built from (it was
    respawned or reconnected, changed): nothing is called before the catalog is loaded, and reviewed,
    again."""

    def __init__(self, slug: str) -> None:
        self.slug = slug
        super().__init__(f"the MCP server of {slug} changed its tools since they were loaded")


class StoreUnopenable(GatewayError):
    """The state database cannot be opened at all (a file that is no database, one this process may not
    write): the operator's to fix, not an outage; the command line exits 3 for it."""


class StateUnwritable(StoreUnopenable):
    """The state folder, or the database file in it, cannot be created by this user (a folder it may
    not write, a path under ``/proc``): the fix is a permission or another ``--state-dir``."""


class StoreUnavailable(GatewayError):
    """The state database cannot be reached (connection refused or lost, server shutting down, disk
    I/O): a transient outage, not a bug. Raised by the stores for connection-level failures only;
    the core answers ``store_unavailable`` and the HTTP edge 503. The message names the database
    with any password redacted, never a secret.

    ``lasting``: the storage itself refuses (a read-only file or folder, a full disk, no permission, the
    file replaced under the gateway): it does not clear by itself, so the agent is not told to retry
    soon, and the message says what the operator must do.

    ``brief``: the cause without naming the database (no URL, no path), for answers anyone may read
    (``/readyz``); None when the message says nothing more than that the database cannot be used."""

    def __init__(self, message: str, *, lasting: bool = False, brief: str | None = None) -> None:
        super().__init__(message)
        self.lasting = lasting
        self.brief = brief
