"""The OAuth2 token broker: access tokens of ``oauth2`` connectors (RFC 6749), cached, stored and refreshed.

Two grants. **Authorization code with PKCE** (RFC 7636, S256) for APIs that act for a person: the
connect page sends the human to the provider with a fresh ``state`` and code challenge, the provider
sends them back to ``/oauth/callback``, and the code is exchanged there. **Client credentials** for
APIs that act as the client itself: a token is fetched whenever one is needed.

Where things live:

- The client's own credentials ``{client_id, client_secret}`` are the connector's ``default``
  credential, entered on a page or with ``secret set``, sealed like every other secret.
- The token set from an authorization (access and refresh token, expiry, and whether the upstream
  has accepted it yet) is the credential named ``oauth2_token`` (``TOKEN_NAME``), sealed too.
- Access tokens in use are cached in memory with their expiry, so a call opens nothing
  while its token is fresh. A token is refreshed shortly before it expires, and once after a 401.
- Authorizations in flight (state -> PKCE verifier and the connect link) live in the store for ten
  minutes, so the provider may send the human back to any instance behind a load balancer. A
  state is 256 random bits, stored as its SHA-256, and taken at most once (atomically, in any
  instance). The verifier and link travel encrypted under a key derived from the state itself:
  the database alone opens nothing, and only the human's browser (and the provider) holds the state.

No login loop: a token set that no upstream has accepted yet is *unverified*. If the upstream
still answers 401 to it after the one renewal, the human has just authorized and trying again
will not help, so the call ends with a terminal ``auth_failed`` error instead of another link.
A previously working token set that stops working gets one refresh, then ``needs_auth``.

Several instances on one database (docs/operations.md): the vault is the truth, the memory
cache only a shortcut. Before refreshing, a call reads the token set again (another instance may
have refreshed it: its newer access token is used as is). One refresh per token set at a time:
within a process by a lock, between processes by a lease in the shared store (``oauth2_lease``);
a call that does not get the lease polls the vault for the new set, up to ``REFRESH_WAIT``
seconds. Only a refresh refused with ``invalid_grant`` (the grant itself is dead) ends the
authorization, and only after one more read of the vault shows the same refresh token: a rotated one
means someone else refreshed. The deletion is audited (``credential_deleted``). Any other refusal
(``invalid_client``: the operator's client configuration) keeps the token set, as a token endpoint
that is rate limiting (429) or failing (5xx) does.

This broker lives in the core, not in ``auth/``, because it talks to the store and the vault; the
per-request pieces (one call's ``OAuth2Session``, the token endpoint exchange) stay in ``auth.oauth2``.

Token endpoint answers are never quoted (``auth._oauth2_endpoint``): only their status and a sanitized
``error`` code reach a message, since a provider may echo what it was sent (the client secret among it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import anyio
import httpx2

from ..auth._base import secret_fields
from ..auth.oauth2 import TOKEN_NAME, AuthorizationRefused, IssuedToken, OAuth2Session, pkce_challenge, request_token
from ..manifest import OAuth2Auth
from ..primitives.secrets import PROJECT_WIDE, CredentialKey, SealedCredential, SecretValue
from ..services.audit import Auditor
from ..services.credentials import CredentialVault
from ..services.logs import known_secrets
from ..store.contract import Store
from ..vocabulary.clock import Clock
from ..vocabulary.errors import (
    AuthorizationEnded,
    CredentialError,
    CredentialMissing,
    StoreUnavailable,
    UpstreamError,
)
from .credential_changes import deletion_record
from .credential_readiness import oauth2_ready
from .oauth2_lease import LEASE_TTL, RefreshLease, lease_key
from .oauth2_pending import PENDING_KIND, PendingAuthorization, open_pending, seal_pending

__all__ = ["ACCOUNT_FIELD", "OAuth2Tokens", "provider_account"]

logger = logging.getLogger(__name__)

STATE_TTL = timedelta(minutes=10)
REFRESH_WAIT = 10.0
"""Seconds a call waits for another instance's refresh of the same token set before giving up."""
MAX_TOKEN_LIFETIME = 366 * 24 * 3600
"""Seconds an access token is used for at most, whatever lifetime its provider gave (a 401 renews it sooner)."""
KEEP_TRYING_FOR = 3.0
"""Seconds a refreshed token set is retried into a store that is down for a moment, before it is kept in memory."""
STORE_AGAIN_EVERY = 5.0
"""Seconds between two attempts to store a refreshed token set the store refused (kept in memory meanwhile)."""
STORE_AGAIN_WITHIN = 1.0
"""Seconds one such attempt may wait on the database (it runs on a call's way to its token)."""
_POLL_FIRST, _POLL_MAX = 0.05, 0.5
"""Seconds between reads of the vault while waiting: doubling from the first to the last."""


ACCOUNT_FIELD = "account"
"""The token set's field naming the provider account that signed in (from its ID token), when known."""


def provider_account(id_token: Any) -> str | None:
    """Who signed in at the provider, as its ID token's claims name them (``email``, else
    ``preferred_username``, else ``sub``); None without an ID token. Read without checking its
    signature: it came straight from the token endpoint over the connection the gateway opened, which
    OpenID Connect accepts in place of the signature (Core 3.1.3.7), and it only labels the sign-in,
    granting nothing. Never the token itself."""
    if not isinstance(id_token, str) or id_token.count(".") != 2:
        return None
    payload = id_token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(claims, dict):
        return None
    for claim in ("email", "preferred_username", "sub"):
        value = cast(dict[str, Any], claims).get(claim)
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return None


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _cache_key(session: OAuth2Session) -> tuple[str, str, str]:
    """Where a call's token is cached: its connector, its principal and the client credential it is
    minted with, as stored now (``SealedCredential.fingerprint``): a client replaced by another process
    (``mcp-gateway secret set``, a teammate) is used from the next call, not once the old client's
    token expires."""
    client = session.client.fingerprint if session.client is not None else ""
    return (session.connector, session.principal, client)


class OAuth2Tokens:
    """Tokens for every ``oauth2`` connector of one gateway: the cache, the grants and the callbacks.

    Args:
        http: the shared client (no proxy from the environment, no redirects followed).
        vault: where client credentials and token sets are sealed.
        clock: for expiry.
        store: shared by every instance: authorizations in flight wait there for the callback, and
            refresh leases are claimed there.
        timeout: seconds for one token endpoint exchange.
        project: the manifest's project, part of every refresh lease's key.
        refresh_wait: seconds a call waits for another instance's refresh of the same token set.
        auditor: where the deletion of a token set whose grant the provider ended is recorded.
        clients: the client for a connector's token request to a URL (one trusting the connector's own
            CA), or None for the shared ``http``.
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        vault: CredentialVault,
        clock: Clock,
        *,
        store: Store,
        timeout: float = 15.0,
        project: str = "",
        refresh_wait: float = REFRESH_WAIT,
        auditor: Auditor | None = None,
        clients: Callable[[str, str], httpx2.AsyncClient | None] | None = None,
    ) -> None:
        self._http = http
        self._clients = clients
        self._vault = vault
        self._clock = clock
        self._store = store
        self._timeout = timeout
        self._project = project
        self._refresh_wait = refresh_wait
        self._auditor = auditor
        # A lease outlives the longest refresh (one exchange, bounded by the timeout), so it never
        # expires under a holder that is still working.
        self._lease_ttl = max(LEASE_TTL, timedelta(seconds=2 * timeout))
        self._cache: dict[tuple[str, str, str], IssuedToken] = {}
        self._locks: dict[tuple[str, str, str], anyio.Lock] = {}
        self._unsaved: dict[CredentialKey, _Unsaved] = {}
        """Refreshed token sets the store refused: the only authorization left where the provider rotates
        refresh tokens, so this process uses them (``_read``) until the store takes them (``_store_unsaved``)."""
        self._store_again_at = 0.0
        self._stranded: dict[str, bytes] = {}
        """Leases this process took but could not release (the store down): lease key -> holder id, so that
        it takes them back rather than wait on itself as on another instance."""

    # -- the call path --------------------------------------------------------------------------

    def session(
        self,
        config: OAuth2Auth,
        connector: str,
        principal: str,
        client: SealedCredential | None,
        *,
        personal: bool = False,
    ) -> OAuth2Session:
        """What ``LastMeterAuth`` runs for one call of an ``oauth2`` connector. ``personal``: the
        connector is ``credentials: per_user``, so only ``principal``'s own token set is used."""
        return OAuth2Session(self, config, connector, principal, client, personal=personal)

    async def ready(
        self, config: OAuth2Auth, connector: str, principal: str | None = None, *, personal: bool = False
    ) -> bool:
        """Whether a call could get a token without a human: client credentials are stored, and for
        the authorization code grant a token set too. With ``personal`` the token set must be
        ``principal``'s own (the client's credentials stay the project's). Decrypts nothing."""
        return oauth2_ready(config, await self._vault.keys(connector), principal, personal=personal)

    def forget(self, connector: str) -> None:
        """Drop every cached token of a connector (a new authorization or client replaced them)."""
        for key in [k for k in self._cache if k[0] == connector]:
            del self._cache[key]

    async def token(self, session: OAuth2Session) -> IssuedToken:
        """A fresh access token for this call: cached, else stored, else refreshed or fetched.

        Raises:
            CredentialMissing: nothing to get one with (no client, no authorization, refresh refused).
            CredentialError: a stored credential cannot be opened.
            UpstreamError: the token endpoint could not be reached or answered nonsense.
        """
        if self._unsaved:
            await self._store_unsaved()
        key = _cache_key(session)
        now = self._clock.now()
        cached = self._cache.get(key)
        if cached is not None and cached.fresh(now):
            return cached
        async with self._lock(key):
            cached = self._cache.get(key)
            if cached is not None and cached.fresh(self._clock.now()):
                return cached  # another call renewed it while this one waited
            issued = await self._obtain(session, rejected=None)
            self._cache[key] = issued
            return issued

    async def renew(self, session: OAuth2Session, rejected: IssuedToken) -> IssuedToken | None:
        """Another token after ``rejected`` drew a 401: a newer stored one, a refreshed one, or a new
        client credentials token. None when there is no way to get one without a human."""
        key = _cache_key(session)
        async with self._lock(key):
            cached = self._cache.get(key)
            if cached is not None and cached is not rejected and cached.fresh(self._clock.now()):
                return cached
            self._cache.pop(key, None)
            try:
                issued = await self._obtain(session, rejected=rejected)
            except AuthorizationEnded:
                raise  # its message says what happened, where a plain 401 answer would not
            except CredentialMissing:
                return None
            self._cache[key] = issued
            return issued

    async def confirm(self, session: OAuth2Session, token: IssuedToken) -> None:
        """The upstream accepted ``token``: mark its stored token set verified (once)."""
        key = _cache_key(session)
        verified = IssuedToken(token.access, token.expires_at, True, token.stored_as)
        if self._cache.get(key) is token:
            self._cache[key] = verified
        if token.stored_as is None:
            return
        # A read-modify-write of the token set, so under its lease: without it, this could put back
        # a set whose refresh token another instance has just spent. A taken lease means a refresh
        # is under way; then a later call sets the flag on the new set.
        # The request has left: a store that fails now must not turn its answer into an error, and a
        # later call marks the set instead.
        lease = self._lease(session.connector, token.stored_as)
        try:
            if not await lease.claim():
                return
        except StoreUnavailable as exc:
            logger.debug("oauth2: the token set of %s not marked verified yet: %s", session.connector, exc)
            return
        try:
            found = await self._read(session.connector, token.stored_as, own_only=True)
            if found is None or found[0].key.principal != token.stored_as:
                return
            sealed, stored = found
            # Only the set this token came from: a newer authorization stays unverified until it works.
            if stored.get("access_token") == token.access.reveal() and stored.get("verified") != "1":
                await self._put(sealed.key, {**stored, "verified": "1"})
        except StoreUnavailable as exc:
            logger.debug("oauth2: the token set of %s not marked verified yet: %s", session.connector, exc)
        finally:
            await self._let_go(lease)

    def evict(self, session: OAuth2Session) -> None:
        self._cache.pop(_cache_key(session), None)

    def _lock(self, key: tuple[str, str, str]) -> anyio.Lock:
        # One renewal per token set at a time: providers that rotate refresh tokens invalidate the
        # old one on use, so two concurrent refreshes would log the second caller out.
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = anyio.Lock()
        return lock

    async def _obtain(self, session: OAuth2Session, rejected: IssuedToken | None) -> IssuedToken:
        config = session.config
        if config.flow == "client_credentials":
            form = {"grant_type": "client_credentials", **_scope(config)}
            answer = await self._grant(session.connector, config, _client(session.client, session.connector), form)
            return self._issued(answer, verified=True, stored_as=None)
        return await self._stored(session, rejected)

    # -- the stored token set, shared by every instance ------------------------------------------

    async def _stored(self, session: OAuth2Session, rejected: IssuedToken | None) -> IssuedToken:
        """The stored access token if it is usable, else a refreshed one: refreshed here if this call
        gets the token set's lease, else by whoever holds it (this call then waits for the result)."""
        deadline = anyio.current_time() + self._refresh_wait
        found = await self._read(session.connector, session.principal, own_only=session.personal)
        while True:
            if found is None:
                raise CredentialMissing(session.connector, TOKEN_NAME)
            usable = self._usable(found, rejected)
            if usable is not None:
                return usable  # possibly refreshed by another instance since this one cached its token
            lease = self._lease(session.connector, found[0].key.principal)
            if await lease.claim():
                try:
                    return await self._refresh(session, rejected)
                finally:
                    await self._let_go(lease)
            found = await self._await_refresh(session, lease, found, deadline)

    async def _await_refresh(
        self, session: OAuth2Session, lease: RefreshLease, seen: _Found, deadline: float
    ) -> _Found | None:
        """Read the vault until the token set differs from ``seen`` or the lease is free (its holder
        finished or gave up); that set, or None if it was deleted (the refresh was refused)."""
        delay = _POLL_FIRST
        while True:
            left = deadline - anyio.current_time()
            if left <= 0:
                raise UpstreamError(
                    "upstream_timeout",
                    f"another gateway instance has been renewing the access token of {session.connector} for "
                    f"{self._refresh_wait:g} s without finishing; try the call again in a few seconds",
                )
            await anyio.sleep(min(delay, left))
            delay = min(2 * delay, _POLL_MAX)
            free = not await lease.taken()
            found = await self._read(session.connector, session.principal, own_only=session.personal)
            if found is None or not _same_set(found, seen) or free:
                return found

    async def _refresh(self, session: OAuth2Session, rejected: IssuedToken | None) -> IssuedToken:
        """Refresh the token set; the caller holds its lease.

        The set is read again first: the lease's previous holder may have refreshed it a moment ago.
        A refusal forgets the authorization only if the vault still holds the refused refresh token;
        a different one was rotated in by someone else (a holder whose lease had expired, an older
        build), so the newer set is used, or refreshed once more.
        """
        found = await self._read(session.connector, session.principal, own_only=session.personal)
        for _ in range(2):
            if found is None:
                raise CredentialMissing(session.connector, TOKEN_NAME)
            usable = self._usable(found, rejected)
            if usable is not None:
                return usable
            sealed, stored = found
            refresh_token = stored.get("refresh_token")
            if not refresh_token:
                raise CredentialMissing(session.connector, TOKEN_NAME)
            form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
            try:
                answer = await self._grant(
                    session.connector, session.config, _client(session.client, session.connector), form
                )
            except AuthorizationRefused as exc:
                if exc.code != "invalid_grant":
                    raise self._client_refused(session, exc) from None
                again = await self._read(session.connector, session.principal, own_only=session.personal)
                if again is not None and not _same_set(again, found):
                    logger.info(
                        "oauth2 refresh for %s was refused (%s), but the stored token set had changed "
                        "meanwhile; using the newer one",
                        session.connector,
                        exc.code,
                    )
                    found = again
                    continue
                if again is not None:
                    # The provider no longer honours this authorization (revoked, expired): forget it, so
                    # the next call hands out a connect link instead of trying the dead refresh token again.
                    await self._forget_ended(session, sealed.key)
                raise _ended(session, sealed.key) from None
            # RFC 6749 section 6: the provider may keep the refresh token; the set keeps its verified flag.
            new_set = self._token_set(answer, refresh_token=refresh_token, verified=stored.get("verified", "0"))
            await self._keep(sealed.key, new_set, replaced=refresh_token)
            return self._from_set(new_set, stored_as=sealed.key.principal)
        raise UpstreamError(
            "upstream_error",
            f"the stored token set of {session.connector} changed twice while it was being refreshed; "
            "try the call again",
        )

    def _client_refused(self, session: OAuth2Session, exc: AuthorizationRefused) -> UpstreamError:
        """A refresh refused for any reason but a dead grant (``invalid_client``, ``unauthorized_client``,
        a bad request): the sign-in may be fine, so it is kept, and the operator's client configuration
        is what to fix."""
        logger.warning(
            "oauth2 refresh for %s was refused (%s); the stored sign-in is kept: check the connector's OAuth2 "
            "client (mcp-gateway secret set %s) and its token_url",
            session.connector,
            exc.code or "no error code",
            session.connector,
        )
        if exc.configuration:
            return UpstreamError(
                "connector_error",
                f"{exc} while renewing the access token: {exc.configuration}. The users' sign-ins are kept, and "
                "another sign-in would not help: tell the operator.",
            )
        if exc.client_refused:
            return UpstreamError(
                "auth_failed",
                f"{exc} while renewing the access token, so the token endpoint does not accept the gateway's OAuth2 "
                f"client for {session.connector}. The users' sign-ins are kept, and another sign-in would not help: "
                "tell the operator to check the connector's client credentials (`mcp-gateway secret set "
                f"{session.connector}`) and its token_url.",
            )
        # A code the gateway has no meaning for, or none it can read: what it means is not guessed.
        return UpstreamError(
            "auth_failed",
            f"{exc} while renewing the access token"
            + ("" if exc.code else ", with no error code the gateway can read")
            + "; the gateway cannot tell why (the provider's explanation is not quoted: it may repeat what was "
            "sent). The users' sign-ins are kept: tell the operator, who can look at the provider's side and "
            f"check the connector's client credentials (`mcp-gateway secret set {session.connector}`) and its "
            "token_url.",
        )

    async def _forget_ended(self, session: OAuth2Session, key: CredentialKey) -> None:
        """Delete a token set whose grant the provider declared dead, on the record like any change."""
        self._unsaved.pop(key, None)
        if not await self._vault.delete(key.connector, principal=key.principal, name=key.name):
            return  # someone else deleted it meanwhile, and recorded that
        logger.warning(
            "oauth2 refresh for %s was refused (invalid_grant): its %s sign-in was deleted; a human must connect "
            "it again",
            key.connector,
            "team-wide" if key.principal == PROJECT_WIDE else "personal",
        )
        if self._auditor is not None:
            await self._auditor.record(
                deletion_record(
                    key, at=self._clock.now(), who=session.principal, via="oauth2 refresh refused (invalid_grant)"
                )
            )

    async def _keep(self, key: CredentialKey, token_set: dict[str, str], *, replaced: str) -> None:
        """Store a refreshed set. A provider that rotates refresh tokens has spent the old one, so this set
        is the only authorization left: when the store refuses it, this process keeps it in memory, uses
        it for its calls (``_read``) and stores it as soon as the store takes it (``_store_unsaved``),
        rather than lose it and spend the old refresh token a second time. Shielded, like the refresh
        itself: a caller cancelled now must not drop it."""
        with anyio.CancelScope(shield=True):
            try:
                await self._put_soon(key, token_set)
            except Exception as exc:
                # Refreshed again before the last one was stored: the vault still holds the set the first
                # one replaced, which is what this one stands in for.
                earlier = self._unsaved.get(key)
                self._unsaved[key] = _Unsaved(earlier.replaced if earlier else _digest(replaced), token_set)
                self._store_again_at = anyio.current_time() + STORE_AGAIN_EVERY
                if earlier is not None:
                    return  # said when the first one was refused
                cause = str(exc) if isinstance(exc, StoreUnavailable) else type(exc).__name__
                logger.error(
                    "oauth2: the refreshed token set of %s could not be stored (%s); this process keeps it in "
                    "memory, uses it and stores it once the database takes it. Should it stop before then, a "
                    "human must connect %s again if its provider rotates refresh tokens",
                    key.connector,
                    cause,
                    key.connector,
                )
            else:
                self._unsaved.pop(key, None)

    async def _put_soon(self, key: CredentialKey, token_set: dict[str, str]) -> None:
        """Put the set, trying again for ``KEEP_TRYING_FOR`` seconds through a store that is down for a
        moment; storage that refuses until someone acts on it (``lasting``) is not waited for."""
        delay = 0.25
        deadline = anyio.current_time() + KEEP_TRYING_FOR
        while True:
            try:
                await self._put(key, token_set)
                return
            except StoreUnavailable as exc:
                if exc.lasting or anyio.current_time() + delay > deadline:
                    raise
                await anyio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _store_unsaved(self) -> None:
        """Try again, at most every ``STORE_AGAIN_EVERY`` seconds and briefly, to store the refreshed sets
        the store refused; a set the vault has moved on from (a new sign-in) is dropped."""
        if anyio.current_time() < self._store_again_at:
            return
        self._store_again_at = anyio.current_time() + STORE_AGAIN_EVERY
        for key, unsaved in list(self._unsaved.items()):
            with anyio.move_on_after(STORE_AGAIN_WITHIN, shield=True):
                try:
                    sealed = await self._vault.stored(key)
                    if sealed is not None and _digest(_token_set(sealed).get("refresh_token", "")) == unsaved.replaced:
                        await self._vault.put(
                            key.connector, unsaved.token_set, principal=key.principal, name=TOKEN_NAME
                        )
                        logger.warning("oauth2: the refreshed token set of %s is stored now", key.connector)
                except Exception as exc:
                    logger.debug("oauth2: the refreshed token set of %s is still not stored (%s)", key.connector, exc)
                    continue
                self._unsaved.pop(key, None)

    async def _put(self, key: CredentialKey, token_set: dict[str, str]) -> None:
        await self._vault.put(key.connector, token_set, principal=key.principal, name=TOKEN_NAME)

    async def _let_go(self, lease: RefreshLease) -> None:
        """Release a lease; when the store refuses, remember it as this process's own, so the next call
        takes it back instead of waiting out its life as if another instance were refreshing."""
        with anyio.CancelScope(shield=True):
            try:
                await lease.release()
            except Exception as exc:
                self._stranded[lease.key] = lease.holder
                logger.debug("oauth2: a refresh lease left in the store (%s); this process takes it back", exc)
            else:
                self._stranded.pop(lease.key, None)

    async def _read(self, connector: str, principal: str, *, own_only: bool) -> _Found | None:
        """The token set as the vault holds it now (never the memory cache's idea of it), or the refreshed
        set this process could not store yet, while the vault still holds the one it replaced. Not
        ``own_only``: the team's sign-in (a personal one left from a ``per_user`` period is not used)."""
        owner = principal if own_only else PROJECT_WIDE
        sealed = await self._vault.sealed(connector, principal=owner, name=TOKEN_NAME, own_only=own_only)
        if sealed is None:
            return None
        found = (sealed, _token_set(sealed))
        unsaved = self._unsaved.get(sealed.key)
        if unsaved is None:
            return found
        if _digest(found[1].get("refresh_token", "")) == unsaved.replaced:
            return sealed, unsaved.token_set
        self._unsaved.pop(sealed.key, None)  # stored meanwhile, or replaced by a new sign-in
        return found

    def _usable(self, found: _Found, rejected: IssuedToken | None) -> IssuedToken | None:
        """The set's access token if it is fresh and not the one the upstream just refused."""
        sealed, stored = found
        current = self._from_set(stored, stored_as=sealed.key.principal)
        if not current.fresh(self._clock.now()):
            return None
        if rejected is not None and rejected.access.reveal() == stored["access_token"]:
            return None
        return current

    def _lease(self, connector: str, stored_as: str) -> RefreshLease:
        key = lease_key(self._project, connector, stored_as, TOKEN_NAME)
        return RefreshLease(self._store, self._clock, key, self._lease_ttl, holder=self._stranded.get(key))

    # -- the human side -------------------------------------------------------------------------

    async def begin(
        self,
        config: OAuth2Auth,
        *,
        connector: str,
        principal: str,
        client_id: str,
        link_token: str,
        redirect_uri: str,
        link_expires_at: datetime,
    ) -> str:
        """Start an authorization; returns the provider URL to send the human to.

        The state and PKCE verifier are new for every start, so opening a connect page twice gives
        two independent attempts, of which only the first to complete can use the link.
        """
        assert config.authorize_url is not None  # the manifest requires it for this flow
        now = self._clock.now()
        expires_at = min(now + STATE_TTL, link_expires_at)
        state = secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(48)  # 64 characters of the RFC 7636 alphabet
        pending = PendingAuthorization(
            connector=connector,
            principal=principal,
            link_token=link_token,
            verifier=verifier,
            redirect_uri=redirect_uri,
            expires_at=expires_at,
        )
        # Expired entries are purged by every put, so abandoned sign-ins cannot pile up.
        await self._store.put_ephemeral(PENDING_KIND, _digest(state), seal_pending(state, pending), expires_at, now)
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            **_scope(config),
            "state": state,
            "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256",
        }
        return str(httpx2.URL(config.authorize_url).copy_merge_params(params))

    async def take(self, state: str) -> PendingAuthorization | None:
        """The authorization this state belongs to, removed so that it works once (whichever instance
        the callback reaches); None if unknown or late."""
        if not state or len(state) > 512:
            return None
        sealed = await self._store.take_ephemeral(PENDING_KIND, _digest(state), self._clock.now())
        return open_pending(state, sealed) if sealed is not None else None

    async def exchange(self, config: OAuth2Auth, pending: PendingAuthorization, code: str) -> dict[str, str]:
        """Trade the code for a token set (RFC 6749 section 4.1.3, with the PKCE verifier). Returns the
        set, still unsaved: the caller stores it once the link is consumed (``save``).

        Raises:
            AuthorizationRefused: the token endpoint refused the code.
            CredentialMissing: the client credentials disappeared meanwhile.
            UpstreamError: the token endpoint could not be reached.
        """
        client = await self._vault.sealed(pending.connector, principal=pending.principal)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "code_verifier": pending.verifier,
        }
        answer = await self._grant(pending.connector, config, _client(client, pending.connector), form)
        token_set = self._token_set(answer, refresh_token=None, verified="0")
        if account := provider_account(answer.get("id_token")):
            token_set[ACCOUNT_FIELD] = account
        return token_set

    async def save(self, connector: str, token_set: dict[str, str], *, principal: str = PROJECT_WIDE) -> None:
        """Seal a new token set and use it from now on: project-wide (a ``shared`` connector), or under
        the user whose connect link it came from (``per_user``)."""
        await self._vault.put(connector, token_set, principal=principal, name=TOKEN_NAME)
        self.forget(connector)

    async def check_client(self, config: OAuth2Auth, connector: str, client: dict[str, str]) -> None:
        """For client credentials: get one token with these credentials before they are stored, so a
        typo shows on the page rather than on the agent's next call. The token is not kept.

        Raises:
            AuthorizationRefused: the token endpoint refused the client.
            UpstreamError: the token endpoint could not be reached.
        """
        await self._grant(connector, config, client, {"grant_type": "client_credentials", **_scope(config)})

    async def _grant(
        self, connector: str, config: OAuth2Auth, client: dict[str, str], form: dict[str, str]
    ) -> dict[str, Any]:
        http = (self._clients(connector, config.token_url) if self._clients else None) or self._http
        return await request_token(http, connector, config, client, form, time_limit=self._timeout)

    def _issued(self, answer: dict[str, Any], *, verified: bool, stored_as: str | None) -> IssuedToken:
        return IssuedToken(
            SecretValue(answer["access_token"]), self._expiry(answer.get("expires_in")), verified, stored_as
        )

    def _token_set(self, answer: dict[str, Any], *, refresh_token: str | None, verified: str) -> dict[str, str]:
        expires_at = self._expiry(answer.get("expires_in"))
        token_set = {
            "access_token": str(answer["access_token"]),
            "expires_at": expires_at.isoformat() if expires_at else "",
            "scope": str(answer.get("scope", ""))[:1000],
            "verified": verified,
        }
        refresh = answer.get("refresh_token") or refresh_token
        if isinstance(refresh, str) and refresh:
            token_set["refresh_token"] = refresh
        return token_set

    def _from_set(self, stored: dict[str, str], *, stored_as: str) -> IssuedToken:
        expires = stored.get("expires_at") or ""
        try:
            expires_at = datetime.fromisoformat(expires) if expires else None
        except ValueError:
            expires_at = self._clock.now()  # unreadable: treat as expired, so it is refreshed
        return IssuedToken(SecretValue(stored["access_token"]), expires_at, stored.get("verified") == "1", stored_as)

    def _expiry(self, expires_in: Any) -> datetime | None:
        """When to stop using a token: its lifetime less a margin (a tenth, at most 30 s), so a token
        does not expire between the check and the upstream reading it. A lifetime past
        ``MAX_TOKEN_LIFETIME`` (``1e30``, infinity) is cut to it, and one that is no number (NaN) is
        unknown: whatever the provider says, the token set it came with is kept (a rotated refresh
        token is the only authorization left)."""
        if isinstance(expires_in, str) and expires_in.isascii() and expires_in.isdigit():
            expires_in = int(expires_in) if len(expires_in) < 16 else MAX_TOKEN_LIFETIME  # int() refuses 4300 digits
        if not isinstance(expires_in, int | float) or isinstance(expires_in, bool) or not expires_in > 0:
            return None  # absent, zero, negative, NaN or not a number
        seconds = float(min(expires_in, MAX_TOKEN_LIFETIME))
        margin = min(30.0, seconds / 10)
        try:
            return self._clock.now() + timedelta(seconds=seconds - margin)
        except OverflowError:  # a clock near the end of the calendar
            return None

    def __repr__(self) -> str:
        return f"OAuth2Tokens(cached={len(self._cache)})"


# -- helpers ----------------------------------------------------------------------------------


def _scope(config: OAuth2Auth) -> dict[str, str]:
    return {"scope": " ".join(config.scopes)} if config.scopes else {}


def _client(sealed: SealedCredential | None, connector: str) -> dict[str, str]:
    if sealed is None:
        raise CredentialMissing(connector)
    secret = sealed.open()
    known_secrets().add(secret)  # a token endpoint may echo it into an error the log or a message quotes
    return secret_fields("oauth2", secret, ("client_id", "client_secret"))


_Found = tuple[SealedCredential, dict[str, str]]
"""A token set read from the vault: where it is sealed, and its fields."""


@dataclass(frozen=True)
class _Unsaved:
    """A refreshed token set the store refused."""

    replaced: str
    """The SHA-256 of the refresh token it replaced: used while the vault still holds that one."""
    token_set: dict[str, str]


def _ended(session: OAuth2Session, key: CredentialKey) -> AuthorizationEnded:
    whose = "the team-wide sign-in" if key.principal == PROJECT_WIDE else "the user's own sign-in"
    return AuthorizationEnded(
        session.connector,
        TOKEN_NAME,
        f"The OAuth2 provider of {session.connector} refused to renew {whose} (invalid_grant: it was revoked or "
        "has expired), so the gateway forgot it; ask the user to sign in again with the link.",
    )


def _same_set(a: _Found, b: _Found) -> bool:
    """Whether two reads found the same token set (a refresh or a new authorization changes both tokens)."""
    return (
        a[0].key == b[0].key
        and a[1].get("access_token") == b[1].get("access_token")
        and a[1].get("refresh_token") == b[1].get("refresh_token")
    )


def _token_set(sealed: SealedCredential) -> dict[str, str]:
    value = sealed.open().reveal()
    if not isinstance(value, dict) or not value.get("access_token"):
        raise CredentialError(
            f"the stored oauth2 token set of {sealed.key.connector!r} is unreadable; connect it again"
        )
    return value
