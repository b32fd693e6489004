"""The six meta-tools: a fixed MCP surface, whatever the size of the catalog behind it.

``build_mcp_server`` registers exactly ``connectors``, ``discover``, ``describe``, ``call``,
``connect`` and ``request_secret`` on an ``MCPServer``. Each returns the gateway's JSON object
as ``structuredContent`` plus the same JSON as text; ``isError`` is set for
``denied`` and ``error``. The tools reach the gateway through this factory's closure, never a
global, and the caller's identity through the HTTP request the transport attached (HTTP) or
the session's fixed principal (stdio).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, ParamSpec, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import X_MCP_HEADER_KEY
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from mcp_types import Tool as MCPTool
from pydantic import BaseModel, Field, ValidationError

from ..core import Gateway, result_payload
from ..core.bounds import too_many_calls
from ..core.health import store_unavailable_result
from ..core.results import Connected
from ..discovery import MAX_QUERY_CHARS
from ..runtime import BackgroundSync
from ..services.identity import Principal
from ..tracing import span
from ..vocabulary.errors import StoreUnavailable
from ..vocabulary.model import Denied, ErrorResult, Ok, PendingApproval
from .argument_errors import plain_argument_errors
from .elicitation import HumanElicitation, request_state_security

__all__ = ["PRINCIPAL_SCOPE_KEY", "build_mcp_server"]

PRINCIPAL_SCOPE_KEY = "mcp_gateway.principal"

INSTRUCTIONS = """\
This server is a gateway to many APIs through six tools. Typical flow: `discover` an action by \
intent -> `describe` it for its full input schema -> `call` it. If `call` answers needs_auth, give \
the user the connect_url; pending_approval, give the user the approval_url and retry the same call \
with approval_id once they approve. Credentials are injected server-side: never ask the user to \
paste a secret into the chat; use `request_secret` to get a link instead."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _observed(
    gateway: Gateway, tool: str
) -> Callable[[Callable[_P, Awaitable[_R]]], Callable[_P, Awaitable[_R | CallToolResult]]]:
    """Wrap a meta-tool: counted in the metrics, a span of its own (under the SDK's request span),
    and a store outage answered as a ``store_unavailable`` error result, logged once per outage."""

    def wrap(fn: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R | CallToolResult]]:
        @functools.wraps(fn)
        async def run(*args: _P.args, **kwargs: _P.kwargs) -> _R | CallToolResult:
            gateway.metrics.observe_tool(tool)
            with span(f"mcp_gateway.{tool}", attributes={"gen_ai.tool.name": tool}):
                try:
                    return await fn(*args, **kwargs)
                except StoreUnavailable as exc:
                    gateway.store_health.failed(exc)
                    return _result(store_unavailable_result())

        return run

    return wrap


def _result(payload: BaseModel | Mapping[str, Any]) -> CallToolResult:
    return _shaped(result_payload(payload))


def _shaped(data: dict[str, Any]) -> CallToolResult:
    """``data``, a JSON object the gateway made, as the tool result: structured, and as text."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=data,
        is_error=data.get("status") in ("denied", "error"),
    )


def package_version() -> str:
    """The installed distribution's version (what ``pip show mcp-action-gateway`` says), else the
    source tree's own (a checkout run with ``PYTHONPATH``): ``initialize`` reports it as serverInfo."""
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    try:
        return version("mcp-action-gateway")
    except PackageNotFoundError:
        return __version__


class _GatewayServer(MCPServer):
    """The SDK's server, answering an unknown prompt like an unknown resource: JSON-RPC -32602 with
    the name, instead of an internal error (-32603) and a traceback in the log; and, with a
    background sync, telling it when the first ``tools/list`` was answered (the six tools are fixed,
    so listing them needs no catalog)."""

    startup: BackgroundSync | None = None

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        if self.startup is not None:
            self.startup.served.set()
        return tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError):
                # The SDK's text is pydantic's report (codes, the input, a URL): said plainly instead.
                raise ToolError(plain_argument_errors(name, exc.__cause__)) from exc.__cause__
            raise

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        if name not in {prompt.name for prompt in await self.list_prompts()}:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})
        return await super().get_prompt(name, arguments, context)


def build_mcp_server(
    gateway: Gateway,
    *,
    default_principal: Principal,
    name: str = "mcp-gateway",
    request_state_key: bytes | None = None,
    startup: BackgroundSync | None = None,
) -> MCPServer:
    """The MCP server for one gateway. ``default_principal`` is used when no HTTP request carries one.
    ``request_state_key`` seals 2026-07-28 ``requestState`` (``elicitation.derive_request_state_key``);
    without it a process-local key is used. ``startup``: the gateway's catalog is still loading
    (``open_gateway(background=...)``); ``initialize`` and ``tools/list`` are answered at once, and
    every tool call waits until the catalog is loaded."""

    def principal_of(ctx: Context) -> Principal:
        return principal_of_request(ctx.request_context)

    def principal_and_session(ctx: Context) -> tuple[Principal, object]:
        # ``Context`` is a pydantic model: each of its properties is a private-attribute lookup
        # through ``BaseModel.__getattr__``, so ``call`` reads the request context once.
        request_context = ctx.request_context
        return principal_of_request(request_context), request_context.session

    def principal_of_request(request_context: ServerRequestContext[Any, Any]) -> Principal:
        request = request_context.request
        scope = getattr(request, "scope", None)
        if scope is not None:
            # The HTTP auth middleware put it there; an HTTP request without one never reaches us.
            principal = scope.get(PRINCIPAL_SCOPE_KEY)
            if isinstance(principal, Principal):
                return principal
        return default_principal

    humans = HumanElicitation(gateway)
    server = _GatewayServer(
        name=name,
        version=package_version(),
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        lifespan=humans.lifespan,
        request_state_security=request_state_security(
            request_state_key, audience=name, principal_of=principal_of_request
        ),
    )
    server.startup = startup

    async def loaded() -> None:
        # Once loaded, no wait at all: awaiting a set event still yields to the event loop once.
        if startup is not None and not startup.ready.is_set():
            await startup.wait_ready()

    async def offered(
        ctx: Context, principal: Principal, tool: str, payload: Any
    ) -> CallToolResult | InputRequiredResult:
        # A human link also goes to a client that declared URL elicitation (see elicitation.py).
        answer = await humans.offer(ctx, principal, tool, result_payload(payload))
        return answer if isinstance(answer, InputRequiredResult) else _shaped(answer)

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(
        name="connectors",
        description="List the connectors (APIs) you may use, with status (ready, needs_auth, error), auth kind and "
        "action count (a note says how many more are held for review or hidden, and why). Start here to see what "
        "is available.",
        annotations=read_only,
    )
    @_observed(gateway, "connectors")
    async def connectors(ctx: Context) -> CallToolResult:
        await loaded()
        return _result(await gateway.connectors(principal_of(ctx)))

    @server.tool(
        name="discover",
        description="Search the actions of every connector by intent, e.g. 'create a github issue'. Returns ranked "
        "actions with name, summary, risk, whether approval or auth is needed, and parameter names.",
        annotations=read_only,
    )
    @_observed(gateway, "discover")
    async def discover(
        ctx: Context,
        query: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What you want to do, in words.")
        ],
        connector: Annotated[str | None, Field(description="Only search this connector's actions.")] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="How many results.")] = 10,
        detail: Annotated[bool, Field(description="Include the top 3 results' full input_schema.")] = False,
    ) -> CallToolResult:
        await loaded()
        found = await gateway.discover(principal_of(ctx), query, connector=connector, limit=limit, detail=detail)
        return _result(found)

    @server.tool(
        name="describe",
        description="Full details of one action: input JSON Schema, risk, and the policy that applies. Use the "
        "qualified name from discover, e.g. 'github.issues.create'.",
        annotations=read_only,
    )
    @_observed(gateway, "describe")
    async def describe(
        ctx: Context,
        tool: Annotated[str, Field(min_length=1, max_length=300, description="Qualified action name.")],
    ) -> CallToolResult:
        await loaded()
        return _result(await gateway.describe(principal_of(ctx), tool))

    @server.tool(
        name="call",
        description="Run an action with arguments matching its input schema. Returns status ok (with data), "
        "pending_approval (show approval_url, then retry with approval_id; add wait to block until the human "
        "decides), needs_auth (show connect_url), denied or error (with the reason and what to do).",
    )
    @_observed(gateway, "call")
    async def call(
        ctx: Context,
        tool: Annotated[str, Field(min_length=1, max_length=300, description="Qualified action name.")],
        args: Annotated[dict[str, Any] | None, Field(description="Arguments, per describe's input_schema.")] = None,
        approval_id: Annotated[
            str | None, Field(max_length=200, description="From a pending_approval result, once approved.")
        ] = None,
        fields: Annotated[
            list[str] | None, Field(max_length=50, description="Dot paths to keep from the result, e.g. ['id'].")
        ] = None,
        wait: Annotated[
            float | None,
            Field(
                ge=0,
                description="Seconds (max 120) to wait for a human's approval; then it runs once if approved.",
            ),
        ] = None,
    ) -> CallToolResult | InputRequiredResult:
        await loaded()
        principal, session = principal_and_session(ctx)
        resumed = await humans.resume(ctx, principal, "call")
        if resumed is not None:
            if not resumed.done:
                return _result(resumed.payload)
            # The human approved (or denied, or connected): the call runs, at most once per approval.
            approval_id = resumed.approval_id or approval_id
            wait = None
        announced: tuple[PendingApproval, CallToolResult | InputRequiredResult] | None = None

        async def announce(pending: PendingApproval) -> None:
            # The human must get the URL elicitation before the wait, not once it is over.
            nonlocal announced
            announced = pending, await offered(ctx, principal, "call", pending)

        elicits = bool(wait) and humans.supported(ctx) and not humans.stateless(ctx)
        # One MCP session may hold as many calls open as one agent: the per-agent cap is
        # the gateway's, this one is the session's.
        with gateway.bounds.calls.holding(f"session:{id(session)}") as admitted:
            if not admitted:
                return _result(too_many_calls(gateway.bounds.calls.limit))
            result = await gateway.call(
                principal,
                tool,
                args or {},
                approval_id=approval_id,
                fields=fields,
                wait=wait,
                on_pending=announce if elicits else None,
            )
        if announced is not None and announced[0] is result:
            return announced[1]  # nobody decided in time: the answer already given stands
        if isinstance(result, Ok | Denied | ErrorResult):
            return _result(result)  # nothing for a human to open: no link to offer
        return await offered(ctx, principal, "call", result)

    @server.tool(
        name="connect",
        description="Get a link for the user to connect an account or enter credentials for a connector. Give the "
        "link to the user; you never see the credential.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @_observed(gateway, "connect")
    async def connect(
        ctx: Context,
        connector: Annotated[str, Field(min_length=1, max_length=63, description="Connector slug.")],
    ) -> CallToolResult | InputRequiredResult:
        await loaded()
        principal = principal_of(ctx)
        resumed = await humans.resume(ctx, principal, "connect")
        if resumed is not None:
            if not resumed.done:
                return _result(resumed.payload)
            return _result(Connected(connector=connector, message=f"The user connected {connector}."))
        return await offered(ctx, principal, "connect", await gateway.connect(principal, connector))

    @server.tool(
        name="request_secret",
        description="Get a link for the user to paste one named secret for a connector. Never ask for secrets in chat.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @_observed(gateway, "request_secret")
    async def request_secret(
        ctx: Context,
        connector: Annotated[str, Field(min_length=1, max_length=63, description="Connector slug.")],
        name: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9_.-]+$")] = "default",
    ) -> CallToolResult | InputRequiredResult:
        await loaded()
        principal = principal_of(ctx)
        resumed = await humans.resume(ctx, principal, "request_secret")
        if resumed is not None:
            if not resumed.done:
                return _result(resumed.payload)
            stored = f"The user stored the secret {name!r}."
            return _result(Connected(connector=connector, name=name, message=stored))
        return await offered(ctx, principal, "request_secret", await gateway.request_secret(principal, connector, name))

    _only_declared_param_headers(server)
    return server


def _only_declared_param_headers(server: MCPServer) -> None:
    """Let the SDK check ``Mcp-Param-*`` headers (2026-07-28 HTTP) only for a tool whose input schema
    declares one (``x-mcp-header``). The SDK walks the whole schema of the called tool twice per
    ``tools/call`` to find those declarations; the six
    meta-tools declare none, so that walk can never reject anything. A schema that does mention
    ``x-mcp-header`` is still handed over and checked as before."""
    lowlevel = server._lowlevel_server
    lookup = getattr(lowlevel, "get_tool_input_schema", None)
    if lookup is None:  # an SDK without the hook (or with it unset): nothing to narrow
        return
    declares: dict[str, tuple[Mapping[str, Any], bool]] = {}

    def declared(name: str) -> Mapping[str, Any] | None:
        schema = lookup(name)
        if schema is None:
            return None
        known = declares.get(name)
        if known is None or known[0] is not schema:
            known = declares[name] = (schema, X_MCP_HEADER_KEY in json.dumps(schema, default=str))
        return schema if known[1] else None

    lowlevel.get_tool_input_schema = declared
