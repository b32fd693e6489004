"""``/approvals/{token}``: a human approves or denies one call.

The page shows who asks (user and agent), the action and its risk, the redacted arguments, and
why approval is needed (the verdict's source and rule). Approve and Deny are buttons of one
CSRF-protected form; the POST consumes the link, then decides the approval by compare-and-set,
so a decision is made once whatever is clicked twice or in two tabs.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...approvals import explain
from ._common import GONE, PageContext, message, page

__all__ = ["approval_routes"]

_STATUS_WORDS = {
    "approved": "approved",
    "denied": "denied",
    "consumed": "approved and run",
    "expired": "left to expire",
}


def approval_routes(ctx: PageContext) -> list[Route]:
    gateway = ctx.gateway

    async def approval_page(request: Request) -> Response:
        token = request.path_params["token"]
        link = await gateway.links.peek("approval", token)
        approval = await gateway.store.get_approval(link.approval_id) if link and link.approval_id else None
        if link is None or approval is None:
            return message(*GONE, status=410, tone="bad")
        if approval.status != "pending":
            said = _STATUS_WORDS.get(approval.status, approval.status)
            return message("Already decided", f"This call was already {said}.", tone="bad")
        if approval.expires_at <= gateway.clock.now():
            return message("Expired", "This request for approval has expired. The agent can ask again.", tone="bad")
        separate = approval.separate_approver
        if request.method == "GET":
            return page(
                "approval.html",
                separate_approver=separate,
                title=f"Approve {approval.tool}?",
                approval=approval,
                why=explain(approval),
                arguments=approval.arguments or approval.summary,
                csrf=ctx.csrf(link.token_hash),
                expires_at=approval.expires_at.strftime("%Y-%m-%d %H:%M"),
            )
        form = await ctx.form(request, link.token_hash)
        if isinstance(form, Response):
            return form
        decision = str(form.get("decision", ""))
        if decision not in ("approve", "deny"):
            return message("Request refused", "Choose Approve or Deny.", status=400, tone="bad")
        if decision == "approve" and separate:
            # The link reaches whoever the agent shows it to, the requester included: approving takes
            # someone else, signed in on the operator overview. Denying stays open to anyone.
            return message(
                "Approval by someone else",
                "This project wants calls approved by someone other than the person who asked. "
                "An operator approves it on the overview (/operator).",
                status=403,
                tone="bad",
            )
        if await gateway.links.consume("approval", token) is None:
            return message(*GONE, status=410, tone="bad")
        decided = await gateway.approvals.decide(approval.id, decision == "approve")
        if decided is None:
            return message("Already decided", "This call was already decided or has expired.", tone="bad")
        if decision == "approve":
            return message(
                "Approved", f"The agent may now run {approval.tool} once, exactly as shown. You can close this page."
            )
        return message("Denied", f"{approval.tool} will not run. You can close this page.", tone="bad")

    return [Route("/approvals/{token}", approval_page, methods=["GET", "POST"])]
