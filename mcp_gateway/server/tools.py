"""The six meta-tools: a fixed MCP surface, whatever the size of the catalog behind it.

Each meta-tool is a class of this module (``Connectors``, ``Discover``, ``Describe``, ``Call``,
``Connect``, ``RequestSecret``) over one gateway; its ``run`` method is what the SDK calls, and
``run``'s parameters after the ``Context`` are the tool's input schema. ``build_mcp_server``
registers one of each on an ``MCPServer``. Each returns the gateway's JSON object as
``structuredContent`` plus the same JSON as text; ``isError`` is set for ``denied`` and ``error``.
The tools hold the gateway they were built with, never a global, and find the caller's identity
in the HTTP request the transport attached (HTTP) or take the session's fixed principal (stdio).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, TypeAlias

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from mcp_types import Tool as MCPTool
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from ..core import Gateway, result_payload
from ..core.bounds import too_many_calls
from ..core.health import store_unavailable_result
from ..core.results import Connected
from ..discovery import MAX_QUERY_CHARS
from ..runtime import BackgroundSync
from ..services.identity import Principal
from ..store.wait_budget import request_budget
from ..tracing import span
from ..vocabulary.errors import LinksUnavailable, StoreUnavailable
from ..vocabulary.model import Denied, ErrorResult, Ok, PendingApproval
from . import fast
from .argument_errors import plain_argument_errors
from .elicitation import HumanElicitation, request_state_security
from .fast.param_headers import only_declared_param_headers
from .session_keys import session_key

__all__ = [
    "META_TOOLS",
    "PRINCIPAL_SCOPE_KEY",
    "Call",
    "Connect",
    "Connectors",
    "Describe",
    "Discover",
    "GatewayServer",
    "MetaTool",
    "RequestSecret",
    "build_mcp_server",
    "package_version",
    "principal_of_request",
    "register",
    "shaped",
]

PRINCIPAL_SCOPE_KEY = "mcp_gateway.principal"

INSTRUCTIONS = """\
This server is a gateway to many APIs through six tools. Typical flow: `discover` an action by \
intent -> `describe` it for its full input schema -> `call` it. If `call` answers needs_auth, give \
the user the connect_url; pending_approval, give the user the approval_url and retry the same call \
with approval_id once they approve. Credentials are injected server-side: never ask the user to \
paste a secret into the chat; use `request_secret` to get a link instead."""

Answer: TypeAlias = CallToolResult | InputRequiredResult
"""What a tool that may hand a human a link answers: the result, or (2026-07-28) a URL elicitation."""

ActionName: TypeAlias = Annotated[str, Field(min_length=1, max_length=300, description="Qualified action name.")]
ConnectorSlug: TypeAlias = Annotated[str, Field(min_length=1, max_length=63, description="Connector slug.")]

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_LINK_MAKER = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)


def shaped(payload: BaseModel | Mapping[str, Any]) -> CallToolResult:
    """``payload``, a result the gateway made, as the tool result: structured, and as JSON text."""
    data = result_payload(payload)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=data,
        is_error=data.get("status") in ("denied", "error"),
    )


def principal_of_request(request_context: ServerRequestContext[Any, Any], default: Principal) -> Principal:
    """Who calls: the principal the HTTP auth middleware put in the request's scope, else ``default``
    (stdio, the in-memory client). An HTTP request without one never reaches a tool."""
    scope = getattr(request_context.request, "scope", None)
    if scope is not None:
        principal = scope.get(PRINCIPAL_SCOPE_KEY)
        if isinstance(principal, Principal):
            return principal
    return default


class MetaTool:
    """What the six meta-tools share: the gateway, the humans their links are offered to, the
    principal of a request that carries none, and the catalog load every call waits for."""

    name: ClassVar[str]
    description: ClassVar[str]
    annotations: ClassVar[ToolAnnotations | None] = None

    def __init__(
        self,
        gateway: Gateway,
        humans: HumanElicitation,
        *,
        default_principal: Principal,
        startup: BackgroundSync | None = None,
    ) -> None:
        self.gateway = gateway
        self.humans = humans
        self.default_principal = default_principal
        self.startup = startup

    def principal_of(self, ctx: Context) -> Principal:
        return principal_of_request(ctx.request_context, self.default_principal)

    async def loaded(self, connector: str | None = None) -> None:
        """Wait for a catalog still loading (``open_gateway(background=...)``): all of it, or only
        ``connector``'s, which is then served before the others are loaded."""
        # Once loaded, no wait at all: awaiting a set event still yields to the event loop once.
        startup = self.startup
        if startup is None or startup.ready.is_set():
            return
        if connector is None:
            await startup.wait_ready()
        elif await startup.wait_for(connector):
            await self.gateway.adopt(connector)

    async def loaded_so_far(self) -> None:
        """Wait a little for a catalog still loading, then serve what has loaded: an answer that lists
        or searches every connector names those still loading instead of waiting for the slowest."""
        startup = self.startup
        if startup is None or startup.ready.is_set():
            return
        for slug in await startup.wait_patiently():
            await self.gateway.adopt(slug)

    async def offered(self, ctx: Context, principal: Principal, payload: BaseModel | Mapping[str, Any]) -> Answer:
        """``payload`` as the answer, its human link also offered to a client that declared URL
        elicitation (see elicitation.py)."""
        answer = await self.humans.offer(ctx, principal, self.name, result_payload(payload))
        return answer if isinstance(answer, InputRequiredResult) else shaped(answer)

    async def linked(self, ctx: Context, done: Connected, mint: Callable[[Principal], Awaitable[BaseModel]]) -> Answer:
        """A link tool's answer: a fresh link from ``mint``, offered; on a 2026-07-28 retry, ``done``
        once the human is done, else the link first answered."""
        principal = self.principal_of(ctx)
        resumed = await self.humans.resume(ctx, principal, self.name)
        if resumed is not None:
            return shaped(done if resumed.done else resumed.payload)
        return await self.offered(ctx, principal, await mint(principal))

    def observed(self, run: Callable[..., Awaitable[Answer]]) -> Callable[..., Awaitable[Answer]]:
        """``run`` counted in the metrics, in a span of its own (under the SDK's request span), and
        a store outage answered as a ``store_unavailable`` error result, logged once per outage."""
        gateway, tool = self.gateway, self.name
        attributes = {"gen_ai.tool.name": tool}

        @functools.wraps(run)
        async def observed_run(*args: Any, **kwargs: Any) -> Answer:
            gateway.metrics.observe_tool(tool)
            # One wait budget for the request: a stalled database answers store_unavailable in time.
            with span(f"mcp_gateway.{tool}", attributes=attributes), request_budget():
                try:
                    return await run(*args, **kwargs)
                except StoreUnavailable as exc:
                    gateway.health.failed(exc)
                    return shaped(store_unavailable_result(exc))
                except LinksUnavailable as exc:
                    return shaped(ErrorResult(reason="internal_error", message=str(exc)))

        # The SDK names the input schema after the function ("callArguments"), not after ``run``.
        observed_run.__name__ = observed_run.__qualname__ = tool
        return observed_run


def _no_bool(value: object) -> object:
    """``true`` is no count (pydantic's lax mode reads it as 1); a number written as text stays accepted."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return value


class Connectors(MetaTool):
    name = "connectors"
    description = (
        "List the connectors (APIs) you may use, with status (ready, needs_auth, error, loading), auth kind and "
        "action count (a note says how many more are held for review or hidden, and why). Start here to see what "
        "is available."
    )
    annotations = _READ_ONLY

    async def run(self, ctx: Context) -> CallToolResult:
        await self.loaded_so_far()
        return shaped(await self.gateway.connectors(self.principal_of(ctx)))


class Discover(MetaTool):
    name = "discover"
    description = (
        "Search the actions of every connector by intent, e.g. 'create a github issue'. Returns ranked "
        "actions with name, summary, risk, whether approval or auth is needed, and parameter names."
    )
    annotations = _READ_ONLY

    async def run(
        self,
        ctx: Context,
        query: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What you want to do, in words.")
        ],
        connector: Annotated[str | None, Field(description="Only search this connector's actions.")] = None,
        # Field before the validator: pydantic then writes the bounds as JSON Schema's minimum and maximum.
        limit: Annotated[int, Field(ge=1, le=50, description="How many results."), BeforeValidator(_no_bool)] = 10,
        detail: Annotated[bool, Field(description="Include the top 3 results' full input_schema.")] = False,
    ) -> CallToolResult:
        if connector is None:
            await self.loaded_so_far()
        else:
            await self.loaded(_connector_of(connector))
        principal = self.principal_of(ctx)
        return shaped(await self.gateway.discover(principal, query, connector=connector, limit=limit, detail=detail))


class Describe(MetaTool):
    name = "describe"
    description = (
        "Full details of one action: input JSON Schema, risk, and the policy that applies. Use the "
        "qualified name from discover, e.g. 'github.issues.create'."
    )
    annotations = _READ_ONLY

    async def run(self, ctx: Context, tool: ActionName) -> CallToolResult:
        await self.loaded(_connector_of(tool))
        return shaped(await self.gateway.describe(self.principal_of(ctx), tool))


class _Announcement:
    """``Gateway.call``'s ``on_pending``: the human gets the URL elicitation of a pending approval
    before the call waits for them, not once the wait is over; the answer given then is kept."""

    __slots__ = ("answer", "ctx", "pending", "principal", "tool")

    def __init__(self, tool: Call, ctx: Context, principal: Principal) -> None:
        self.tool, self.ctx, self.principal = tool, ctx, principal
        self.pending: PendingApproval | None = None
        self.answer: Answer | None = None

    async def __call__(self, pending: PendingApproval) -> None:
        self.pending, self.answer = pending, await self.tool.offered(self.ctx, self.principal, pending)


class Call(MetaTool):
    name = "call"
    description = (
        "Run an action with arguments matching its input schema. Returns status ok (with data), "
        "pending_approval (show approval_url, then retry with approval_id; add wait to block until the human "
        "decides), needs_auth (show connect_url), denied or error (with the reason and what to do)."
    )

    async def run(
        self,
        ctx: Context,
        tool: ActionName,
        args: Annotated[dict[str, Any] | None, Field(description="Arguments, per describe's input_schema.")] = None,
        approval_id: Annotated[
            str | None, Field(max_length=200, description="From a pending_approval result, once approved.")
        ] = None,
        fields: Annotated[
            list[str] | None, Field(max_length=50, description="Dot paths to keep from the result, e.g. ['id'].")
        ] = None,
        wait: Annotated[
            float | None,
            Field(ge=0, description="Seconds (max 120) to wait for a human's approval; then it runs once if approved."),
        ] = None,
    ) -> Answer:
        await self.loaded(_connector_of(tool))
        # ``Context`` is a pydantic model: each of its properties is a private-attribute lookup
        # through ``BaseModel.__getattr__``, so the request context is read once.
        request_context = ctx.request_context
        principal = principal_of_request(request_context, self.default_principal)
        resumed = await self.humans.resume(ctx, principal, "call")
        if resumed is not None:
            if not resumed.done:
                return shaped(resumed.payload)
            # The human approved (or denied, or connected): the call runs, at most once per approval.
            approval_id, wait = resumed.approval_id or approval_id, None
        announce = _Announcement(self, ctx, principal)
        elicits = bool(wait) and self.humans.supported(ctx) and not self.humans.stateless(ctx)
        gateway = self.gateway
        # One MCP session may hold as many calls open as one agent: the per-agent cap is
        # the gateway's, this one is the session's.
        with gateway.bounds.calls.holding(session_key(request_context)) as admitted:
            if not admitted:
                return shaped(too_many_calls(gateway.bounds.calls.limit))
            result = await gateway.call(
                principal,
                tool,
                args or {},
                approval_id=approval_id,
                fields=fields,
                wait=wait,
                on_pending=announce if elicits else None,
            )
        if announce.answer is not None and announce.pending is result:
            return announce.answer  # nobody decided in time: the answer already given stands
        if isinstance(result, Ok | Denied | ErrorResult):
            return shaped(result)  # nothing for a human to open: no link to offer
        return await self.offered(ctx, principal, result)


class Connect(MetaTool):
    name = "connect"
    description = (
        "Get a link for the user to connect an account or enter credentials for a connector. Give the "
        "link to the user; you never see the credential."
    )
    annotations = _LINK_MAKER

    async def run(self, ctx: Context, connector: ConnectorSlug) -> Answer:
        await self.loaded(connector)
        done = Connected(connector=connector, message=f"The user connected {connector}.")
        return await self.linked(ctx, done, functools.partial(self.gateway.connect, connector=connector))


class RequestSecret(MetaTool):
    name = "request_secret"
    description = "Get a link for the user to paste one named secret for a connector. Never ask for secrets in chat."
    annotations = _LINK_MAKER

    async def run(
        self,
        ctx: Context,
        connector: ConnectorSlug,
        name: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9_.-]+$")] = "default",
    ) -> Answer:
        await self.loaded(connector)
        done = Connected(connector=connector, name=name, message=f"The user stored the secret {name!r}.")
        mint = functools.partial(self.gateway.request_secret, connector=connector, name=name)
        return await self.linked(ctx, done, mint)


def _connector_of(tool: str) -> str:
    """The connector an action name starts with, as a slug is written (a name the gateway cannot place
    this way waits for the whole catalog)."""
    return tool.partition(".")[0].strip().lower()


AnyMetaTool: TypeAlias = Connectors | Discover | Describe | Call | Connect | RequestSecret
META_TOOLS: tuple[type[AnyMetaTool], ...] = (Connectors, Discover, Describe, Call, Connect, RequestSecret)
"""The six, in the order ``tools/list`` names them."""


def register(server: MCPServer, tool: AnyMetaTool) -> None:
    """Serve ``tool`` on ``server`` under its name, observed (``MetaTool.observed``)."""
    server.add_tool(tool.observed(tool.run), name=tool.name, description=tool.description, annotations=tool.annotations)


def package_version() -> str:
    """The installed distribution's version (what ``pip show mcp-action-gateway`` says), else the
    source tree's own (a checkout run with ``PYTHONPATH``): ``initialize`` reports it as serverInfo."""
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    try:
        return version("mcp-action-gateway")
    except PackageNotFoundError:
        return __version__


class GatewayServer(MCPServer):
    """The SDK's server, answering an unknown prompt like an unknown resource: JSON-RPC -32602 with
    the name, instead of an internal error (-32603) and a traceback in the log; a tool's bad
    arguments in plain words; and, with a background sync, telling it when the first ``tools/list``
    was answered (the six tools are fixed, so listing them needs no catalog)."""

    startup: BackgroundSync | None = None
    _parameters: dict[str, tuple[str, ...]] | None = None

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        if self.startup is not None:
            self.startup.served.set()
        return tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        unknown = await self._unknown_parameters(name, arguments)
        if unknown:
            # The SDK drops them: `call` with "arguments" for "args" ran the action with none at all.
            raise ToolError(unknown)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError):
                # The SDK's text is pydantic's report (codes, the input, a URL): said plainly instead.
                raise ToolError(plain_argument_errors(name, exc.__cause__)) from exc.__cause__
            raise

    async def _unknown_parameters(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        """The plain-words error for parameters ``name`` does not take, each with the one it may mean."""
        if self._parameters is None:
            self._parameters = {
                tool.name: tuple(tool.input_schema.get("properties") or ()) for tool in await super().list_tools()
            }
        known = self._parameters.get(name)
        if known is None or not arguments:
            return None
        unknown = [key for key in arguments if key not in known]
        if not unknown:
            return None
        said = [f"{key[:60]!r} is not a parameter of this tool{_meant(key, known)}" for key in unknown[:5]]
        more = f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""
        expected = ", ".join(known) or "none"
        return f"invalid arguments for {name}: {'; '.join(said)}{more}. Its parameters: {expected}"

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        if name not in {prompt.name for prompt in await self.list_prompts()}:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})
        return await super().get_prompt(name, arguments, context)


_SAME_MEANING = {"arguments": "args", "params": "args", "parameters": "args", "input": "args", "name": "tool"}
"""Names agents reach for from other APIs (MCP's own ``tools/call`` says ``arguments``)."""


def _meant(key: str, known: Sequence[str]) -> str:
    """`` (did you mean args?)`` when ``key`` reads as one of ``known``, else nothing."""
    folded = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower().replace("-", "_")
    meant = _SAME_MEANING.get(folded) if _SAME_MEANING.get(folded) in known else None
    if meant is None:
        close = difflib.get_close_matches(folded, known, n=1, cutoff=0.6)
        meant = close[0] if close else None
    return f" (did you mean {meant}?)" if meant is not None else ""


def build_mcp_server(
    gateway: Gateway,
    *,
    default_principal: Principal,
    name: str = "mcp-gateway",
    request_state_key: bytes | None = None,
    startup: BackgroundSync | None = None,
    fast_paths: bool = fast.ENABLED,
) -> MCPServer:
    """The MCP server for one gateway. ``default_principal`` is used when no HTTP request carries one.
    ``request_state_key`` seals 2026-07-28 ``requestState`` (``elicitation.derive_request_state_key``);
    without it a process-local key is used. ``startup``: the gateway's catalog is still loading
    (``open_gateway(background=...)``); ``initialize`` and ``tools/list`` are answered at once, and
    every tool call waits until the catalog is loaded. ``fast_paths``: ``Mcp-Param-*`` headers are
    checked only for a tool that declares one (``fast.param_headers``)."""
    humans = HumanElicitation(gateway)
    server = GatewayServer(
        name=name,
        version=package_version(),
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        lifespan=humans.lifespan,
        request_state_security=request_state_security(
            request_state_key,
            audience=name,
            principal_of=functools.partial(principal_of_request, default=default_principal),
        ),
    )
    server.startup = startup
    for meta_tool in META_TOOLS:
        register(server, meta_tool(gateway, humans, default_principal=default_principal, startup=startup))
    if fast_paths:
        only_declared_param_headers(server)
    return server
