"""The gateway core: the ``Gateway`` and the collaborators it is composed of (see ``core.gateway``).

Layering: the core uses ``execution`` (sending, executors), the services (approvals, audit, links,
identity, the credential vault) and everything below; only ``runtime``, ``server`` and ``cli`` use it.
"""

from __future__ import annotations

from .gateway import Gateway
from .results import result_payload

__all__ = ["Gateway", "result_payload"]
