"""``connectors``' answer: one entry per connector a principal may use, shaped one way whether the
catalogs are loaded (``Gateway.connectors``) or read back from the state file by the command line
(``cli/listing.py``). Light to import: the command line builds it without the rest of the core.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from ..manifest import ConnectorConfig
from ..manifest.auth import needs_secret
from ..vocabulary.model import ConnectorInfo, ConnectorStatus, withheld_note

__all__ = ["ConnectorsResult", "connector_info", "loading_info"]


class ConnectorsResult(BaseModel):
    """``connectors``: every connector this principal may use."""

    model_config = ConfigDict(frozen=True)
    connectors: list[ConnectorInfo]
    discovery: str | None = None
    """How ``discover`` ranks: "discovery: lexical only" or "discovery: hybrid (<model>; ...)"."""


def connector_info(
    cfg: ConnectorConfig,
    status: ConnectorStatus,
    *,
    loaded: int,
    withheld: Mapping[str, int],
    configured: bool,
    awaiting_credential: bool = False,
    refused_credential: bool = False,
    error: str | None = None,
    warning: str | None = None,
    refused: str = "",
) -> ConnectorInfo:
    """The entry for ``cfg``, whose last load ended in ``status`` with ``loaded`` actions, of which
    ``withheld`` (by why) agents may not see; ``configured``: whether its calls could run without a
    human connecting first; ``awaiting_credential``: whether its load failed for want of one;
    ``refused_credential``: whether it failed because its upstream refused the one stored (401);
    ``refused``: the sentence on a team-wide credential its upstream refused at a call since it was
    stored (``credential_origins.refused_note``): not ready, whatever loaded."""
    if status == "ready" and needs_secret(cfg.auth) and not configured:
        status = "needs_auth"
    elif status == "error" and awaiting_credential and not configured:
        status = "needs_auth"  # it is the credential it waits for: connect is the next step
    elif status == "error" and refused_credential:
        status = "needs_auth"  # a new credential is the next step, not a retry
    if refused and status == "ready":
        status = "needs_auth"  # its calls draw a 401 until another credential is stored
    if refused:
        warning = f"{refused} {warning}" if warning else refused
    available = loaded - sum(withheld.values())
    return ConnectorInfo(
        slug=cfg.slug,
        name=cfg.display_name,
        description=cfg.description,
        status=status,
        actions=available,
        auth=cfg.auth.type,
        auth_configured=configured or not needs_secret(cfg.auth),
        error=error,
        warning=warning,
        withheld=dict(withheld) or None,
        note=withheld_note(available, withheld),
    )


def loading_info(cfg: ConnectorConfig) -> ConnectorInfo:
    """The entry for ``cfg`` while the start-up sync (or a reload) has not loaded it yet: listed, so
    no connector goes missing from the answer, with no actions counted yet."""
    return ConnectorInfo(
        slug=cfg.slug,
        name=cfg.display_name,
        description=cfg.description,
        status="loading",
        actions=0,
        auth=cfg.auth.type,
        auth_configured=not needs_secret(cfg.auth),
        note="still loading its actions: list connectors again in a moment, or describe or call one of its "
        "actions, which waits for it",
    )
