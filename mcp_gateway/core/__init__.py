"""The gateway core: the ``Gateway`` and the collaborators it is composed of (see ``core.gateway``).

Layering: the core uses ``execution`` (sending, executors), the services (approvals, audit, links,
identity, the credential vault) and everything below; only ``runtime``, ``server`` and ``cli`` use it.

``Gateway`` is imported on first use: the command line's stored-state answers import a few light
modules of the core (``visibility``, ``credential_readiness``, ``connectors_answer``,
``discover_answer``, ``shown``) and must not load the ``Gateway`` with the HTTP client and executors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .shown import result_payload

if TYPE_CHECKING:
    from .gateway import Gateway

__all__ = ["Gateway", "result_payload"]


def __getattr__(name: str) -> Any:
    if name == "Gateway":
        from .gateway import Gateway

        return Gateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
