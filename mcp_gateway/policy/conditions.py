"""``when`` conditions: operators on one argument's value, compared as JSON values (see ``Condition``)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, field_validator

from .patterns import Matcher, as_regex, compile_matcher

__all__ = ["OPERATORS", "Condition"]


def _number(value: Any) -> Any:
    # YAML hands us real numbers; a quoted "10000" or a `true` here is a mistake worth reporting.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"needs a number here, not the {_kind(value)} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"needs a finite number here, not {value!r}")
    return value


_Number = Annotated[int | float, BeforeValidator(_number)]


class Condition(BaseModel):
    """Conditions on one argument's value (a ``when:`` entry); every operator given must hold.

    * ``eq``, ``ne``, ``in``, ``not_in`` compare JSON values exactly: ``1`` equals ``1.0`` but not
      ``true`` or ``"1"`` (a bool is not a number).
    * ``gt``, ``gte``, ``lt``, ``lte`` compare numbers. A bool, null, list or object never holds
      (a bool is not a number). A string never holds either, but many APIs would read ``"1000000"``
      as a number, so for a string the answer is *undecided* (``holds`` returns None) and
      ``evaluate`` settles it on the strict side: ``"1000000"`` cannot slip past ``gt: 100``.
    * ``prefix`` (case-sensitive) and ``matches`` (a regex, searched; ``/body/flags`` or a bare
      body) hold only for a string value.
    * A missing argument fails every operator except ``exists: false``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    eq: Any = None
    ne: Any = None
    in_: list[Any] | None = Field(None, alias="in")
    """Spelled ``in`` in a manifest (and in ``Condition.model_validate``); ``in_`` only in Python."""
    not_in: list[Any] | None = None
    gt: _Number | None = None
    gte: _Number | None = None
    lt: _Number | None = None
    lte: _Number | None = None
    matches: str | None = None
    prefix: str | None = None
    exists: bool | None = None

    _matcher: Matcher | None = PrivateAttr(default=None)

    @field_validator("in_", "not_in", "gt", "gte", "lt", "lte", "matches", "prefix", "exists", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Only eq/ne may compare with null; a null bound is a typo that would silently never hold.
        if value is None:
            raise ValueError("needs a value here, not null")
        return value

    @field_validator("matches")
    @classmethod
    def _valid_regex(cls, value: str) -> str:
        # Unlike a rule's `match`, a broken `when` regex is refused at load: a condition that
        # silently never holds would turn a conditional block into no block at all.
        matcher = compile_matcher(as_regex(value))
        if matcher.error:
            raise ValueError(matcher.error)
        return value

    def model_post_init(self, context: Any, /) -> None:
        if not self.model_fields_set:
            raise ValueError("a condition needs at least one operator: " + ", ".join(OPERATORS))
        if self.matches is not None:
            self._matcher = compile_matcher(as_regex(self.matches))

    def holds(self, present: bool, value: Any) -> bool | None:
        """Whether the condition holds for one argument; None when the value is too long to decide."""
        given = self.model_fields_set
        if self.exists is not None and present != self.exists:
            return False
        if not present:
            return given <= {"exists"}
        result: bool | None = True
        for op in given:
            outcome = self._check(op, value)
            if outcome is False:
                return False
            if outcome is None:
                result = None
        return result

    def _check(self, op: str, value: Any) -> bool | None:
        if op == "eq":
            return _same(value, self.eq)
        if op == "ne":
            return not _same(value, self.ne)
        if op == "in_":
            return any(_same(value, item) for item in self.in_ or [])
        if op == "not_in":
            return not any(_same(value, item) for item in self.not_in or [])
        if op in ("gt", "gte", "lt", "lte"):
            return _compare(op, value, getattr(self, op))
        if op == "prefix":
            return isinstance(value, str) and self.prefix is not None and value.startswith(self.prefix)
        if op == "matches":
            if not isinstance(value, str) or self._matcher is None:
                return False
            return self._matcher.check(value)
        return True  # "exists" was settled before any value was looked at


OPERATORS = ("eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte", "matches", "prefix", "exists")
"""The ``when`` operators, as spelled in a manifest."""


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else type(value).__name__


def _same(a: Any, b: Any) -> bool:
    """JSON equality: Python's ``True == 1`` must not let a bool pass for a number."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "array":
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if kind == "object":
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _compare(op: str, value: Any, bound: float | None) -> bool | None:
    kind = _kind(value)
    if kind == "string":
        # Many APIs read "1000000" (or "1e6", " 1000000", "1000000abc") as a number, and the
        # agent chose the string: leave it undecided, so evaluate settles on the strict side.
        return None
    if bound is None or kind != "number":
        return False
    if op == "gt":
        return bool(value > bound)
    if op == "gte":
        return bool(value >= bound)
    if op == "lt":
        return bool(value < bound)
    return bool(value <= bound)
