"""The human pages, one module per kind: credentials (connect and secret links), the
OAuth2 callback, approvals, and the operator's overview. ``web_routes`` assembles them for a
gateway; the MCP HTTP app and the stdio page server both serve exactly these routes."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...core import Gateway
from ..mcp_door import FrontDoor
from ._common import PageContext
from .approval_page import approval_routes
from .approver import ApproverSignIn
from .credential_page import FIELDS, Field, credential_routes
from .oauth import oauth_routes
from .operator import OperatorTokens, operator_routes

__all__ = ["FIELDS", "Field", "OperatorTokens", "web_routes"]


def web_routes(gateway: Gateway, front_door: FrontDoor | None = None) -> list[Route]:
    """The pages; with a ``front_door`` that names an ``approver_client_id``, approvers sign in on
    the approval page through its issuer."""
    ctx = PageContext(gateway)
    client_id = front_door.config.approver_client_id if front_door is not None else None
    sign_in = ApproverSignIn(ctx, front_door, client_id) if front_door is not None and client_id else None

    async def healthz(_: Request) -> Response:
        auditor = gateway.auditor
        return JSONResponse(
            {
                "status": "ok",
                "audit_failures": auditor.failures,
                # Outcome rows the store refused, kept in the state folder's journal (since start), and
                # whether some still wait for it to answer again.
                "audit_journaled": auditor.journaled,
                "audit_journal_pending": auditor.journal_pending,
                "discovery": gateway.discovery_status,
            }
        )

    return [
        Route("/healthz", healthz),
        *credential_routes(ctx),
        *oauth_routes(ctx),
        *approval_routes(ctx, sign_in),
        *operator_routes(ctx),
    ]
