"""Policy as pure functions (SPEC 6): three layers, first hit wins, every verdict says why.

    project rules (qualified name)  ->  connector rules (relative path)  ->  defaults
    defaults: sensitive -> require_approval; allow_all -> always_run; risk -> read runs, the rest ask

Matchers are compiled once, when the manifest is parsed. A glob is anchored and case-insensitive;
``/regex/flags`` is a regular expression. A regex that does not compile, or whose nested
quantifiers could backtrack catastrophically, becomes a matcher that never matches and carries
an error for ``validate`` (fail safe: a broken rule never grants or blocks by accident). Argument
values are capped before any pattern sees them, because agents control them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from .model import PolicyAction, Risk, Verdict, VerdictSource

__all__ = ["Condition", "Matcher", "Rule", "compile_matcher", "evaluate", "is_hidden"]

MAX_VALUE_CHARS = 4096
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*[+*{]")


@dataclass(frozen=True)
class Matcher:
    pattern: str
    regex: re.Pattern[str] | None
    error: str | None = None

    def matches(self, name: str) -> bool:
        return self.regex is not None and self.regex.fullmatch(name[:MAX_VALUE_CHARS]) is not None


def _compile_regex(body: str, flags: str) -> re.Pattern[str]:
    if _NESTED_QUANTIFIER.search(body):
        raise ValueError("nested quantifiers can backtrack catastrophically; rewrite without '(...+)+'")
    f = 0
    for ch in flags:
        if ch == "i":
            f |= re.IGNORECASE
        elif ch == "s":
            f |= re.DOTALL
        elif ch == "m":
            f |= re.MULTILINE
        else:
            raise ValueError(f"unknown regex flag {ch!r}; use i, s or m")
    return re.compile(body, f)


def compile_matcher(pattern: str) -> Matcher:
    """``/body/flags`` is a regex (searched, as written); anything else an anchored case-insensitive glob."""
    m = re.fullmatch(r"/(.*)/([a-z]*)", pattern, re.DOTALL)
    if m:
        try:
            rx = _compile_regex(m.group(1), m.group(2))
        except (re.error, ValueError) as exc:
            return Matcher(pattern, None, f"invalid regex: {exc}")
        # A regex rule states its own anchoring; wrap it so fullmatch behaves like search.
        return Matcher(pattern, re.compile(f"(?:.*?)(?:{rx.pattern})(?:.*)", rx.flags | re.DOTALL))
    return Matcher(pattern, re.compile(fnmatch.translate(pattern), re.IGNORECASE))


class Condition(BaseModel):
    """Conditions on one argument's value; all given operators must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, populate_by_name=True)
    eq: Any = None
    ne: Any = None
    in_: list[Any] | None = None
    not_in: list[Any] | None = None
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    matches: str | None = None
    prefix: str | None = None
    exists: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and "in" in data:
            data = {**data, "in_": data["in"]}
            del data["in"]
        return data

    @model_validator(mode="after")
    def _compile(self) -> Condition:
        matcher = None
        if self.matches is not None:
            m = re.fullmatch(r"/(.*)/([a-z]*)", self.matches, re.DOTALL)
            matcher = compile_matcher(self.matches if m else f"/{self.matches}/")
            if matcher.error:
                raise ValueError(matcher.error)
        object.__setattr__(self, "_matcher", matcher)
        return self

    def holds(self, present: bool, value: Any) -> bool:
        given = self.model_fields_set - {"exists"}
        if self.exists is not None and present != self.exists:
            return False
        if not present:
            return not given
        checks = []
        if "eq" in given:
            checks.append(value == self.eq)
        if "ne" in given:
            checks.append(value != self.ne)
        if "in_" in given:
            checks.append(value in (self.in_ or []))
        if "not_in" in given:
            checks.append(value not in (self.not_in or []))
        for op, bound in (("gt", self.gt), ("gte", self.gte), ("lt", self.lt), ("lte", self.lte)):
            if op in given:
                checks.append(_compare(op, value, bound))
        if "matches" in given:
            checks.append(isinstance(value, str) and self._matcher.matches(value))  # type: ignore[attr-defined]
        if "prefix" in given:
            checks.append(isinstance(value, str) and value[:MAX_VALUE_CHARS].startswith(self.prefix or ""))
        return all(checks)


def _compare(op: str, value: Any, bound: float | None) -> bool:
    if bound is None or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return {"gt": value > bound, "gte": value >= bound, "lt": value < bound, "lte": value <= bound}[op]


class Rule(Protocol):
    """What ``evaluate`` needs of a rule (``manifest.PolicyRule`` is one)."""

    @property
    def matcher(self) -> Matcher: ...
    @property
    def action(self) -> PolicyAction: ...
    @property
    def when(self) -> Mapping[str, Condition] | None: ...


def _conditions_hold(rule: Rule, args: Mapping[str, Any]) -> bool:
    if not rule.when:
        return True
    return all(cond.holds(key in args, args.get(key)) for key, cond in rule.when.items())


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
    """Decide one call. ``args`` are the final arguments, after any server-side injection."""
    for layer, name, rules in (("project", qualified_name, project_rules), ("connector", path, connector_rules)):
        for rule in rules:
            if rule.matcher.matches(name) and _conditions_hold(rule, args):
                source: VerdictSource = "project" if layer == "project" else "connector"
                return Verdict(action=rule.action, source=source, rule=rule.matcher.pattern)
    if sensitive:
        return Verdict(action="require_approval", source="sensitive")
    if default_mode == "allow_all":
        return Verdict(action="always_run", source="allow_all")
    return Verdict(action="always_run" if risk == "read" else "require_approval", source="risk_default")


def is_hidden(*, qualified_name: str, path: str, project_rules: Sequence[Rule], connector_rules: Sequence[Rule]) -> bool:
    """True when the first matching rule, ignoring none, is an unconditional block (SPEC 2.4).

    An action whose first hit is conditional stays visible: whether it runs depends on its arguments.
    """
    for name, rules in ((qualified_name, project_rules), (path, connector_rules)):
        for rule in rules:
            if rule.matcher.matches(name):
                if rule.when:
                    return False
                return rule.action == "block"
    return False
