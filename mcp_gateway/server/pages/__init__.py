"""The human pages, one module per kind: credentials (connect and secret links), the
OAuth2 callback, approvals, and the operator's overview. ``web_routes`` assembles them for a
gateway; the MCP HTTP app and the stdio page server both serve exactly these routes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...core import Gateway
from ...services.audit import Auditor
from ..mcp_door import FrontDoor
from ._common import PageContext
from .approval_page import ApprovalPage
from .approver import ApproverSignIn
from .credential_page import FIELDS, CredentialPages, Field
from .oauth import OAuthCallback
from .operator import OperatorPages, OperatorTokens

__all__ = ["FIELDS", "Field", "HealthPage", "OperatorTokens", "web_routes"]


def web_routes(gateway: Gateway, front_door: FrontDoor | None = None) -> list[Route]:
    """The pages; with a ``front_door`` that names an ``approver_client_id``, approvers sign in on
    the approval page through its issuer. Each page gets the services it acts on, not the gateway."""
    ctx = PageContext(gateway.links, gateway.clock, gateway.sessions, gateway.page_key or b"")
    client_id = front_door.config.approver_client_id if front_door is not None else None
    sign_in = (
        ApproverSignIn(ctx, front_door, client_id, gateway.credentials)
        if front_door is not None and client_id
        else None
    )
    operator = OperatorPages(ctx, gateway, gateway.approvals, gateway.auditor, gateway.review, gateway.operators)
    return [
        Route("/healthz", HealthPage(gateway.auditor, lambda: gateway.discovery_status).healthz),
        *CredentialPages(ctx, gateway, gateway.credentials).routes(),
        *OAuthCallback(ctx, gateway, gateway.credentials).routes(),
        *ApprovalPage(ctx, gateway.links, gateway.approvals, sign_in).routes(),
        *operator.routes(),
    ]


@dataclass(frozen=True)
class HealthPage:
    """``/healthz``: alive, and how the audit trail and discovery are doing."""

    auditor: Auditor
    discovery: Callable[[], str]
    """The gateway's ``discovery_status`` as it is when asked (hybrid discovery embeds in the background)."""

    async def healthz(self, _: Request) -> Response:
        auditor = self.auditor
        return JSONResponse(
            {
                "status": "ok",
                "audit_failures": auditor.failures,
                # Outcome rows the store refused, kept in the state folder's journal (since start), and
                # whether some still wait for it to answer again.
                "audit_journaled": auditor.journaled,
                "audit_journal_pending": auditor.journal_pending,
                "discovery": self.discovery(),
            }
        )
