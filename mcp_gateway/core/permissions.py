"""Grant and policy, applied to the loaded catalogs: which connectors and actions a principal may
see and address, the policy verdict on a call, and the denial for a name that resolves to nothing.

``Permissions`` keeps no state of its own: it reads the manifest in force and the loaded connectors
from ``Catalogs``, and the actions from the discovery index, so a reload changes what it answers.
(It remembers, per action, a verdict no argument can change, together with the manifest, connector
and action it was decided on: any of them replaced, it is decided again.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import httpx2

from ..discovery import DiscoveryIndex, guess_as_query, summary_of
from ..manifest import ConnectorConfig, Manifest
from ..policy import strictest
from ..primitives.quoting import quoted
from ..services.identity import Principal, granted_connectors
from ..vocabulary.model import Action, Denied, RequestBinding, Verdict
from . import visibility
from .addressed import addressed, request_path
from .catalogs import Catalogs
from .recovery import connector_named
from .results import shown_schema, shown_summary

__all__ = ["SUGGESTIONS", "Permissions"]

SUGGESTIONS = 3
"""How many close names an unknown action's denial suggests."""
_MAX_VERDICTS = 8192


class Permissions:
    """What a principal sees and what a rule decides."""

    def __init__(self, catalogs: Catalogs, index: DiscoveryIndex) -> None:
        self._catalogs = catalogs
        self._index = index
        self._verdicts: dict[str, tuple[Action, Manifest, ConnectorConfig, Verdict]] = {}

    def visible(self, principal: Principal) -> frozenset[str]:
        """The loaded connectors granted to ``principal``."""
        return granted_connectors(self._catalogs.manifest, principal) & self._catalogs.loaded.keys()

    def loading(self, principal: Principal) -> list[str]:
        """The connectors granted to ``principal`` that the start-up sync (or a reload) has not loaded
        yet, by slug: not ``visible`` until it has."""
        return sorted(self.granted(principal) - self._catalogs.loaded.keys())

    def granted_slug(self, principal: Principal, name: str) -> str | None:
        """The slug of the connector granted to ``principal`` that ``name`` names, as written or up to
        case and surrounding spaces (``GitHub``, `` github ``); None when none is."""
        granted = self.granted(principal)
        if name in granted:
            return name
        wanted = name.strip().lower()
        return next((slug for slug in sorted(granted) if slug.lower() == wanted), None)

    def granted(self, principal: Principal) -> frozenset[str]:
        """The connectors granted to ``principal``, loaded or not."""
        return frozenset(granted_connectors(self._catalogs.manifest, principal))

    def hidden(self, action: Action) -> bool:
        """Whether a ``hide`` rule keeps the action out of connectors, discover and describe."""
        return visibility.hidden(self._catalogs.manifest, self._catalogs.config(action.connector), action)

    def allow(self, action: Action) -> bool:
        """Whether agents may see the action: no ``hide`` rule, and not quarantined for review."""
        return not self.hidden(action) and self._catalogs.quarantined(action.qualified_name) is None

    def withheld(self, actions: Iterable[Action]) -> dict[str, int]:
        """How many of ``actions`` agents may not see, by why (``hidden by policy``, ``held for
        review (hides text)`` …), most first: what ``connectors`` explains beside its count."""
        return visibility.withheld(actions, self.hidden, self._catalogs.held_reason)

    def lookup(self, principal: Principal, name: str, *, include_hidden: bool = False) -> Action | None:
        """The action this principal may address by ``name``. ``call`` includes blocked ones, so
        the agent learns that a rule (and which layer) stopped it rather than a bare not-found."""
        action = self._index.resolve(name)
        if action is None or action.connector not in self.visible(principal):
            return None
        return None if not include_hidden and not self.allow(action) else action

    def _elsewhere(self, principal: Principal, name: str) -> Denied | None:
        """A name that is a connector's own, or that opens with a product no connector of the caller's
        is (``jira.issues.create`` over GitHub): said so, since the closest spelling would be another
        product's action ("create an issue" in GitHub instead of Jira)."""
        head, dot, _ = name.strip().partition(".")
        slug = self.granted_slug(principal, head)
        if not dot and slug is not None:
            return Denied(
                reason="action_not_found",
                message=f"{slug!r} is a connector, not an action: call discover with connector {slug!r} "
                "to search its actions, then describe or call one by its full name.",
            )
        missing = self._index.products_missing(head, self.visible(principal)) if dot and slug is None else ()
        if not missing:
            return None  # no product's name, or one a connector of the caller's is (``jira-cloud``)
        yours = ", ".join(sorted(self.granted(principal))[:20]) or "none"
        product = missing[0]
        return Denied(
            reason="connector_not_found",
            message=f"No connector for {product} here (yours: {yours}), so no action {quoted(name)}. "
            f"Tell the user {product} is not connected; an operator can add it (mcp-gateway add).",
        )

    def connector_of(self, principal: Principal, name: str) -> str | None:
        """The visible connector an action name starts with, whether or not the action exists."""
        return connector_named(name, self.visible(principal))

    def verdict(self, action: Action, args: Mapping[str, Any]) -> Verdict:
        fixed = self.fixed_verdict(action)
        if fixed is not None:
            return fixed
        return visibility.verdict(self._catalogs.manifest, self._catalogs.config(action.connector), action, args)

    def request_verdict(
        self, action: Action, args: Mapping[str, Any], request: httpx2.Request, base_url: str
    ) -> Verdict:
        """The verdict on a generic request call, judged as the request it sends: its own rules see the
        sent method and path (``addressed.request_path``), and each curated action the request reaches
        (``addressed.addressed``) is judged as if called directly; the strictest verdict wins."""
        path = request_path(request.url, base_url)
        verdicts = [self.verdict(action, {**args, "method": request.method, "path": path})]
        catalog = self._catalogs.loaded.get(action.connector)
        for target, target_args in addressed(catalog.actions if catalog is not None else (), request, path):
            verdicts.append(self.verdict(target, target_args))
        return strictest(verdicts)

    def hop_verdict(self, action: Action, args: Mapping[str, Any], hop: httpx2.Request, base_url: str) -> Verdict:
        """The verdict on the next request a redirect of a call of ``action`` leads to (``hop``): the
        call's own rules still hold for its continuation, and the hop is judged as the request it is,
        as a call of the connector's generic request action would be (its rules, and those of each
        curated action the hop reaches); the strictest wins."""
        query = dict(parse_qsl(hop.url.query.decode("ascii", "replace"), keep_blank_values=True))
        generic = {**{k: v for k, v in args.items() if k not in ("query", "body")}, "query": query}
        if isinstance(action.binding, RequestBinding):
            return self.request_verdict(action, generic, hop, base_url)
        verdicts = [self.verdict(action, args)]
        fallback = self._catalogs.request_fallback(action)
        if fallback is not None:
            verdicts.append(self.request_verdict(fallback, {"query": query}, hop, base_url))
        else:
            path = request_path(hop.url, base_url)
            catalog = self._catalogs.loaded.get(action.connector)
            for target, target_args in addressed(catalog.actions if catalog is not None else (), hop, path):
                verdicts.append(self.verdict(target, target_args))
        return strictest(verdicts)

    def fixed_verdict(self, action: Action) -> Verdict | None:
        """The verdict on ``action`` whatever its arguments (worked out once per action, manifest and
        connector), or None when they may change it: arguments decide only through the ``when`` of a
        rule that matches, and the generic request action's method."""
        manifest = self._catalogs.manifest
        cfg = self._catalogs.config(action.connector)
        kept = self._verdicts.get(action.qualified_name)
        if kept is not None and kept[0] is action and kept[1] is manifest and kept[2] is cfg:
            return kept[3]
        if isinstance(action.binding, RequestBinding) or self.conditional(action):
            return None
        verdict = visibility.verdict(manifest, cfg, action, {})
        if len(self._verdicts) >= _MAX_VERDICTS:
            self._verdicts.clear()
        self._verdicts[action.qualified_name] = (action, manifest, cfg, verdict)
        return verdict

    def conditional(self, action: Action) -> bool:
        """Whether a rule with ``when`` may change the verdict depending on the arguments."""
        return visibility.conditional(self._catalogs.manifest, self._catalogs.config(action.connector), action)

    async def not_found(self, principal: Principal, name: str) -> Denied:
        elsewhere = self._elsewhere(principal, name)
        if elsewhere is not None:
            return elsewhere
        visible = self.visible(principal)
        suggestions = self._index.suggest(name, limit=SUGGESTIONS, connectors=visible, allow=self.allow)
        if len(suggestions) < SUGGESTIONS:
            # A guess is a query too: what ``discover`` is sure of for its words (by meaning, when
            # discovery is hybrid) fills what its spelling did not find.
            query, dense = guess_as_query(name), self._catalogs.dense
            found = (
                await dense.find(self._index, query, limit=SUGGESTIONS, connectors=visible, allow=self.allow)
                if dense is not None
                else self._index.find(query, limit=SUGGESTIONS, connectors=visible, allow=self.allow)
            )
            if found.confidence == "high":
                named = {a.qualified_name for a in suggestions}
                more = [a for a, _ in found.hits if a.qualified_name not in named]
                suggestions = [*suggestions, *more][:SUGGESTIONS]
        hint = f" Closest: {', '.join(a.qualified_name for a in suggestions)}." if suggestions else ""
        return Denied(
            reason="action_not_found",
            message=f"No action named {quoted(name)}.{hint} Use discover to search by intent.",
            suggestions=[
                {
                    "name": a.qualified_name,
                    "summary": shown_summary(summary_of(a)),
                    "risk": a.risk,
                    "input_schema": shown_schema(a.input_schema),
                }
                for a in suggestions
            ],
        )
