"""The verdict: three layers, first hit wins, and the stricter side when a rule is undecided.

    project rules (qualified name)  ->  connector rules (relative path)  ->  defaults

How patterns match and how long a value is read: see the package docstring (``mcp_gateway.policy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..vocabulary.model import Action, PolicyAction, RequestBinding, Risk, Verdict, VerdictSource, risk_of_method
from .conditions import Condition
from .patterns import Matcher

__all__ = ["Rule", "effective_risk", "evaluate", "is_hidden", "strictest"]

_STRICTNESS: dict[str, int] = {"always_run": 0, "require_approval": 1, "block": 2}


# -- evaluation -----------------------------------------------------------------------------


class Rule(Protocol):
    """What ``evaluate`` needs of a rule (``manifest.PolicyRule`` is one)."""

    @property
    def matcher(self) -> Matcher: ...
    @property
    def action(self) -> PolicyAction: ...
    @property
    def when(self) -> Mapping[str, Condition] | None: ...
    @property
    def separate_approver(self) -> bool: ...


def _conditions_hold(rule: Rule, args: Mapping[str, Any]) -> bool | None:
    if not rule.when:
        return True
    result: bool | None = True
    for key, cond in rule.when.items():
        outcome = cond.holds(key in args, args.get(key))
        if outcome is False:
            return False
        if outcome is None:
            result = None
    return result


def evaluate(
    *,
    qualified_name: str,
    path: str,
    risk: Risk,
    args: Mapping[str, Any],
    project_rules: Sequence[Rule],
    connector_rules: Sequence[Rule],
    sensitive: bool,
    default_mode: str,
) -> Verdict:
    """Decide one call. ``args`` are the final arguments, after any server-side injection.

    The first rule whose pattern matches and whose conditions hold decides. A rule whose
    conditions cannot be decided (a value too long to match safely) may or may not apply, so
    the stricter of both outcomes is kept: ``block`` > ``require_approval`` > ``always_run``,
    the earlier rule on a tie. ``default_mode`` is ``risk`` or ``allow_all``; anything else
    counts as ``risk``.
    """
    undecided: list[Verdict] = []
    for source, name, rules in (("project", qualified_name, project_rules), ("connector", path, connector_rules)):
        for rule in rules:
            if not rule.matcher.matches(name):
                continue
            outcome = _conditions_hold(rule, args)
            if outcome is False:
                continue
            verdict = Verdict(
                action=rule.action,
                source=_layer(source),
                rule=rule.matcher.pattern,
                separate_approver=rule.separate_approver and rule.action == "require_approval",
            )
            if outcome is True:
                return strictest([*undecided, verdict])
            undecided.append(verdict)
    return strictest([*undecided, _default(risk=risk, sensitive=sensitive, default_mode=default_mode)])


def effective_risk(action: Action, args: Mapping[str, Any]) -> Risk:
    """The risk policy defaults judge a call by: the action's own, except for the generic
    ``request`` action, whose risk is that of the HTTP method the call uses (a GET through it is
    a read, a DELETE destructive). Without a method (``describe``, ``discover``) it keeps its
    static risk, ``write``, the stricter answer."""
    if isinstance(action.binding, RequestBinding):
        method = args.get("method")
        if isinstance(method, str) and method.strip():
            return risk_of_method(method.strip())
    return action.risk


def _layer(source: str) -> VerdictSource:
    return "project" if source == "project" else "connector"


def _default(*, risk: Risk, sensitive: bool, default_mode: str) -> Verdict:
    if sensitive:
        return Verdict(action="require_approval", source="sensitive")
    if default_mode == "allow_all":
        return Verdict(action="always_run", source="allow_all")
    return Verdict(action="always_run" if risk == "read" else "require_approval", source="risk_default")


def strictest(verdicts: Sequence[Verdict]) -> Verdict:
    """The strictest of ``verdicts``: ``block`` > ``require_approval`` > ``always_run``, the first on a tie."""
    # max() keeps the first of equals, so on a tie the earlier rule is the one reported.
    return max(verdicts, key=lambda v: _STRICTNESS[v.action])


def is_hidden(
    *, qualified_name: str, path: str, project_rules: Sequence[Rule], connector_rules: Sequence[Rule]
) -> bool:
    """True when every call of the action is blocked whatever its arguments.

    That is: the first unconditional matching rule blocks, and every conditional rule matching
    before it blocks too. A conditional ``always_run`` or ``require_approval`` first keeps the
    action visible: whether it runs depends on its arguments.
    """
    for name, rules in ((qualified_name, project_rules), (path, connector_rules)):
        for rule in rules:
            if not rule.matcher.matches(name):
                continue
            if rule.action != "block":
                return False
            if not rule.when:
                return True
    return False
