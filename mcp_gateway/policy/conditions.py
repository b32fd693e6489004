"""``when`` conditions: operators on one argument's value, compared as JSON values (see ``Condition``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, cast

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

    Values are judged as the wire carries them, and a value whose shape leaves the answer open is
    *undecided* (``holds`` returns None), which ``evaluate`` settles on the strict side:

    * A list is judged by its elements (a query or form parameter ``[5000]`` goes out as
      ``amount=5000``): the answer all of them agree on, else undecided. An object is undecided
      against anything but an object or list ``eq``/``in`` value, since how it is spelled on the
      wire depends on the API.
    * ``gt``, ``gte``, ``lt``, ``lte`` compare numbers. A plain decimal string (``"5000"``,
      ``"-1.5"``) counts as its number; any other string (``" 5e3 "``, ``"1000abc"``) and a bool
      are undecided (APIs read them in different ways); null never holds.
    * ``eq``, ``ne``, ``in``, ``not_in`` compare JSON values, with a plain decimal string equal
      to its number (``"1"`` equals ``1``), and a bool equal to its JSON spelling as a string
      (``"true"``), never to a number. A string another API might read as a number (``"1e3"``)
      is undecided against a number.
    * ``prefix`` (case-sensitive) and ``matches`` (a regex, searched; ``/body/flags`` or a bare
      body) read a value's wire text: a string as is, a number or bool as JSON spells it; null
      never holds.
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
            return _judged(value, lambda v: _equal(v, self.eq), structured=_structured(self.eq))
        if op == "ne":
            return _negated(_judged(value, lambda v: _equal(v, self.ne), structured=_structured(self.ne)))
        if op in ("in_", "not_in"):
            found = _any(
                _judged(value, lambda v, item=item: _equal(v, item), structured=_structured(item))
                for item in (self.in_ if op == "in_" else self.not_in) or []
            )
            return found if op == "in_" else _negated(found)
        if op in ("gt", "gte", "lt", "lte"):
            bound = getattr(self, op)
            return _judged(value, lambda v: _compare(op, v, bound))
        if op == "prefix":
            prefix = self.prefix or ""
            return _judged(value, lambda v: _text_check(v, lambda text: text.startswith(prefix)))
        if op == "matches":
            matcher = self._matcher
            if matcher is None:
                return False
            return _judged(value, lambda v: _text_check(v, matcher.check))
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


_MAX_ELEMENTS = 1000
"""A list longer than this is undecided rather than judged element by element."""
_PLAIN_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")


def _structured(bound: Any) -> bool:
    return isinstance(bound, list | tuple | dict)


def _judged(value: Any, check: Callable[[Any], bool | None], *, structured: bool = False) -> bool | None:
    """``check`` on ``value`` as the wire carries it: a list by its elements (the answer they all
    give, else None), an object undecided, unless the operator's own value is a list or object
    (``structured``), which is then compared whole."""
    if structured:
        return check(value)
    if isinstance(value, list | tuple):
        items = cast("Sequence[Any]", value)
        if len(items) > _MAX_ELEMENTS:
            return None
        outcomes = {_judged(item, check) for item in items}
        return outcomes.pop() if len(outcomes) == 1 else (False if not outcomes else None)
    if isinstance(value, dict):
        return None
    return check(value)


def _negated(outcome: bool | None) -> bool | None:
    return None if outcome is None else not outcome


def _any(outcomes: Iterable[bool | None]) -> bool | None:
    result: bool | None = False
    for outcome in outcomes:
        if outcome is True:
            return True
        if outcome is None:
            result = None
    return result


def _number_in(text: str) -> float | None:
    """The number a string spells plainly (``"5000"``, ``"-1.5"``); None for anything else."""
    return float(text) if len(text) <= 400 and _PLAIN_NUMBER.fullmatch(text) else None


def _numeric_reading(text: str) -> bool:
    """Whether some API may read ``text`` as a number though it is not a plain one (``" 5e3 "``, ``"1e3"``,
    ``"0x10"``, ``"1000abc"``): anything that starts, past spaces and a sign, with a digit or a dot."""
    return bool(re.match(r"\s*[+-]?\.?[0-9]", text[:64]))


def _equal(a: Any, b: Any) -> bool | None:
    """Equality as the wire carries both: JSON equality, a plain decimal string equal to its number, a
    bool to its JSON spelling; None when some API may read them as equal and another not."""
    kind_a, kind_b = _kind(a), _kind(b)
    if kind_a == kind_b:
        return _same(a, b)
    pair = {kind_a, kind_b}
    if pair == {"string", "number"}:
        text, number = (a, b) if kind_a == "string" else (b, a)
        plain = _number_in(text)
        if plain is not None:
            return plain == number
        return None if _numeric_reading(text) else False
    if pair == {"string", "bool"}:
        text, flag = (a, b) if kind_a == "string" else (b, a)
        return text == ("true" if flag else "false")
    return False


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


def _text_check(value: Any, check: Callable[[str], bool | None]) -> bool | None:
    """``check`` on a scalar's wire text (JSON spellings for numbers and bools); null never holds."""
    if value is None:
        return False
    if isinstance(value, bool):
        return check("true" if value else "false")
    if isinstance(value, int | float):
        return check(json.dumps(value))
    return check(value) if isinstance(value, str) else None


def _compare(op: str, value: Any, bound: float | None) -> bool | None:
    kind = _kind(value)
    if kind == "string":
        # "5000" is 5000 to every API; " 5e3 ", "1000abc" or "0x10" are numbers to some of them, so
        # those are left undecided and evaluate settles them on the strict side.
        number = _number_in(value)
        if number is None:
            return None
        value, kind = number, "number"
    if kind == "bool":
        return None  # some APIs read true as 1
    if bound is None or kind != "number":
        return False
    if op == "gt":
        return bool(value > bound)
    if op == "gte":
        return bool(value >= bound)
    if op == "lt":
        return bool(value < bound)
    return bool(value <= bound)
