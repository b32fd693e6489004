"""Policy as pure functions (SPEC 6): three layers, first hit wins, every verdict says why.

    project rules (qualified name)  ->  connector rules (relative path)  ->  defaults
    defaults: sensitive -> require_approval; allow_all -> always_run; risk -> read runs, the rest ask

Matchers are compiled once, when the manifest is parsed (and cached, so a reload costs nothing).

* A **glob** matches the whole name, case-insensitively: ``issues.create`` matches ``Issues.Create``
  but neither ``xissues.create`` nor ``issues.created``. ``*`` matches any run of characters
  *including dots* (as :mod:`fnmatch` does), so ``*.delete*`` matches ``github.repos.delete`` and
  ``github.*`` covers every action of ``github``; ``?`` is one character, ``[abc]`` a set.
* ``/regex/flags`` is a Python regular expression **searched** in the name, exactly as written:
  it states its own anchoring (``/^stripe\\.refunds\\./``), and is case-sensitive unless it carries
  the ``i`` flag (flags: ``i``, ``m``, ``s``).

Fail safe, never fail open: a regex that does not compile, or whose shape could backtrack
catastrophically (a quantifier inside a repeated group, ``(a+)+``, ``(\\w+\\s?)+``; overlapping
alternatives under a repeat, ``(a|aa)+``), becomes a matcher that never matches and carries an
``error`` that ``validate`` reports; ``when.matches`` refuses such a pattern outright.

Agents control argument values, so a value is matched only up to a length that keeps the worst
case of its pattern within a few milliseconds. The length comes from the number of overlapping
repeats the pattern chains: ``^[a-z]+$`` reads 4096 characters, ``.*x`` 2048, ``a.*b.*c`` 161, and
a chain of four ``.*`` is refused. Past that length the answer is *undecided* (unless a match was
already found well inside the part that was read), and ``evaluate`` settles an undecided rule on
the strict side: it keeps the stricter of "this rule applies" and "it does not", so padding a
value can never slip past a ``block`` and never earns an ``always_run``.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from re import _constants as _sre  # the stdlib parser itself, so the analysis sees what re.compile sees
from re import _parser as _sre_parse
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, field_validator

from .model import Action, PolicyAction, RequestBinding, Risk, Verdict, VerdictSource, risk_of_method

__all__ = [
    "MAX_VALUE_CHARS",
    "OPERATORS",
    "Condition",
    "Matcher",
    "Rule",
    "compile_matcher",
    "effective_risk",
    "evaluate",
    "is_hidden",
]

MAX_VALUE_CHARS = 4096
"""The most characters of one value (or name) any pattern ever reads."""

_REGEX_FORM = re.compile(r"/(.*)/([A-Za-z]*)", re.DOTALL)
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
_STRICTNESS: dict[str, int] = {"always_run": 0, "require_approval": 1, "block": 2}


# -- matchers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Matcher:
    """One compiled ``match`` pattern (or ``when.matches`` regex).

    ``regex`` is None when the pattern is unusable; then ``error`` says why and nothing matches.
    """

    pattern: str
    regex: re.Pattern[str] | None
    error: str | None = None
    search: bool = False
    """Regex rules are searched in the text; globs must match all of it."""
    max_chars: int = MAX_VALUE_CHARS
    """Longer texts are not fully matched (see the module docstring)."""
    looks_ahead: bool = False
    """A lookahead can read past any cut, so a match in a truncated text proves nothing."""

    def matches(self, name: str) -> bool:
        """Whether ``name`` matches for certain (an undecided answer is False)."""
        return self.check(name) is True

    def check(self, text: str) -> bool | None:
        """True or False, or None when ``text`` is too long to decide within the time budget."""
        if self.regex is None:
            return False
        if len(text) <= self.max_chars:
            found = self.regex.search(text) if self.search else self.regex.fullmatch(text)
            return found is not None
        if self.search and not self.looks_ahead:
            head = text[: self.max_chars]
            found = self.regex.search(head)
            # A match ending at least two characters before the cut was decided by characters
            # that are the same in the full text ($ and \b look at most one character ahead).
            if found is not None and found.end() < len(head) - 1:
                return True
        return None


@functools.lru_cache(maxsize=4096)
def compile_matcher(pattern: str) -> Matcher:
    """Compile a rule pattern: ``/body/flags`` is a searched regex, anything else a glob.

    Never raises: an unusable pattern gives a matcher that never matches, with ``error`` set.

    Example:
        >>> compile_matcher("issues.*").matches("Issues.Create")
        True
        >>> compile_matcher("/(a+)+$/").error is not None
        True
    """
    form = _REGEX_FORM.fullmatch(pattern)
    if form is None:
        # fnmatch.translate anchors at both ends and turns '*' into a non-backtracking '.*'.
        return Matcher(pattern, re.compile(fnmatch.translate(pattern), re.IGNORECASE))
    body, letters = form.groups()
    flags = 0
    for letter in letters:
        if letter not in _FLAGS:
            return Matcher(pattern, None, f"unknown regex flag {letter!r}; the flags are i, m and s")
        flags |= _FLAGS[letter]
    if not body:
        return Matcher(pattern, None, "an empty regex matches everything; write '*' if that is meant")
    try:
        regex = re.compile(body, flags)
    except re.error as exc:
        return Matcher(pattern, None, f"invalid regex: {exc}")
    shape = _Shape(_sre_parse.parse(body, flags))
    if shape.problem is not None:
        return Matcher(pattern, None, shape.problem)
    if shape.max_chars < 32:
        return Matcher(
            pattern,
            None,
            f"the regex chains {shape.degree - 1} overlapping repeats like '.*'; matching it against an "
            "agent's value could take seconds. Use fewer '.*', or character classes that cannot overlap",
        )
    return Matcher(pattern, regex, search=True, max_chars=shape.max_chars, looks_ahead=shape.looks_ahead)


# -- regex shape analysis -------------------------------------------------------------------
#
# Python's re backtracks. Two shapes make it slow on text an agent chooses:
#   exponential: a repeated group whose iterations can split the same text in several ways,
#     because something variable inside it can also start the next iteration ((a+)+, (\w+\s?)+,
#     (a|aa)+). Refused. (\.[a-z]+)* is fine: [a-z]+ must stop at the '.' that starts the next one.
#   polynomial: n start positions times, for each unbounded repeat that overlaps what follows it,
#     n ways to end it (a.*b.*c is n^3). Bounded by reading at most
#     2 ** (22 / degree) characters: about 2000 for degree 2, 160 for degree 3.
# Character sets are compared on a sample alphabet: ASCII, Latin-1, a few characters of other
# scripts and categories, plus every literal and range bound the pattern names.

_Charset = frozenset[int]
_BUDGET_LOG2 = 22
_VARIABLE = (_sre.MAX_REPEAT, _sre.MIN_REPEAT)
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT)
_SAMPLE_EXTRA = (
    0x100, 0x130, 0x131, 0x17F, 0x391, 0x3C9, 0x410, 0x44F, 0x5D0, 0x627, 0x660, 0x669, 0x966,
    0x1680, 0x2000, 0x2028, 0x2029, 0x212A, 0x3000, 0x4E2D, 0xFF10, 0xFF21, 0x1F600, 0x10FFFF,
)  # fmt: skip
_CATEGORIES = {
    _sre.CATEGORY_DIGIT: re.compile(r"\d"),
    _sre.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
    _sre.CATEGORY_SPACE: re.compile(r"\s"),
    _sre.CATEGORY_NOT_SPACE: re.compile(r"\S"),
    _sre.CATEGORY_WORD: re.compile(r"\w"),
    _sre.CATEGORY_NOT_WORD: re.compile(r"\W"),
}


class _Shape:
    """What matters about a parsed regex for its worst-case running time."""

    def __init__(self, parsed: _sre_parse.SubPattern) -> None:
        self.icase = bool(parsed.state.flags & re.IGNORECASE) or _any_scoped_ignorecase(list(parsed))
        codes = set(range(256)) | set(_SAMPLE_EXTRA)
        _collect_codes(list(parsed), codes)
        self.alphabet: tuple[int, ...] = tuple(sorted(c for c in codes if 0 <= c <= 0x10FFFF))
        self.everything: _Charset = frozenset(self.alphabet)
        self._memo: dict[tuple[Any, int], tuple[_Charset, bool]] = {}
        self.problem: str | None = None
        self.looks_ahead = False
        self.ambiguous = 0
        self.tail = False
        seq = list(parsed)
        self._walk(seq, frozenset())
        anchored = (
            bool(seq)
            and seq[0][0] is _sre.AT
            and (
                seq[0][1] is _sre.AT_BEGINNING_STRING
                or (seq[0][1] is _sre.AT_BEGINNING and not parsed.state.flags & re.MULTILINE)
            )
        )
        self.degree = (0 if anchored else 1) + self.ambiguous + (1 if self.tail else 0)
        self.max_chars = (
            MAX_VALUE_CHARS if self.degree <= 1 else min(MAX_VALUE_CHARS, int(2 ** (_BUDGET_LOG2 / self.degree)))
        )

    # -- character sets

    def _chars(self, op: Any, av: Any) -> _Charset:
        if op is _sre.LITERAL:
            return self._where(lambda ch: ch == av)
        if op is _sre.NOT_LITERAL:
            return self._where(lambda ch: ch != av)
        if op is _sre.ANY:
            return self.everything
        if op is _sre.IN:
            negate = bool(av) and av[0][0] is _sre.NEGATE
            items = av[1:] if negate else av
            found = self._where(lambda ch: any(_in_item(item, ch) for item in items))
            return self.everything - found if negate else found
        return self.everything  # anything unexpected counts as "could be any character"

    def _where(self, test: Any) -> _Charset:
        if not self.icase:
            return frozenset(c for c in self.alphabet if test(c))
        return frozenset(c for c in self.alphabet if any(test(v) for v in _case_variants(c)))

    def _first(self, seq: list[Any]) -> tuple[_Charset, bool]:
        """The characters ``seq`` can start with, and whether it can match the empty string."""
        first: set[int] = set()
        for op, av in seq:
            item_first, nullable = self._first_item(op, av)
            first |= item_first
            if not nullable:
                return frozenset(first), False
        return frozenset(first), True

    def _first_item(self, op: Any, av: Any) -> tuple[_Charset, bool]:
        # Parse-tree nodes live as long as the analysis, so their identity is a safe memo key.
        key = (op, id(av))
        if key not in self._memo:
            self._memo[key] = self._first_item_uncached(op, av)
        return self._memo[key]

    def _first_item_uncached(self, op: Any, av: Any) -> tuple[_Charset, bool]:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN):
            return self._chars(op, av), False
        if op in _REPEATS:
            low, _high, body = av
            first, nullable = self._first(list(body))
            return first, nullable or low == 0
        if op is _sre.SUBPATTERN:
            return self._first(list(av[3]))
        if op is _sre.ATOMIC_GROUP:
            return self._first(list(av))
        if op is _sre.BRANCH:
            firsts = [self._first(list(alt)) for alt in av[1]]
            return frozenset().union(*(f for f, _ in firsts)), any(n for _, n in firsts)
        if op is _sre.GROUPREF_EXISTS:
            yes = self._first(list(av[1]))
            no = self._first(list(av[2])) if av[2] is not None else (frozenset(), True)
            return yes[0] | no[0], yes[1] or no[1]
        if op is _sre.GROUPREF:
            return self.everything, True
        return frozenset(), True  # anchors and lookarounds consume nothing

    def _then(self, seq: list[Any], follow: _Charset) -> _Charset:
        first, nullable = self._first(seq)
        return first | follow if nullable else first

    def _afters(self, seq: list[Any], follow: _Charset) -> list[_Charset]:
        """For each item of ``seq``, what may come right after it (built from the end: linear)."""
        out = [follow] * len(seq)
        for i in range(len(seq) - 2, -1, -1):
            first, nullable = self._first_item(*seq[i + 1])
            out[i] = first | out[i + 1] if nullable else first
        return out

    # -- the walk

    def _walk(self, seq: list[Any], follow: _Charset) -> None:
        """Count polynomial factors and look for exponential shapes; ``follow`` may come after ``seq``."""
        for (op, av), after in zip(seq, self._afters(seq, follow), strict=True):
            if op in _REPEATS:
                low, high, body = av
                body = list(body)
                body_first, _ = self._first(body)
                if high - low > 8 and op is not _sre.POSSESSIVE_REPEAT:
                    if body_first & after:
                        self.ambiguous += 1
                    else:
                        self.tail = True
                if high > 1 and op is not _sre.POSSESSIVE_REPEAT and self.problem is None:
                    self.problem = self._splits_iterations(body, body_first)
                self._walk(body, body_first | after if high > 1 else after)
            elif op is _sre.SUBPATTERN:
                self._walk(list(av[3]), after)
            elif op is _sre.ATOMIC_GROUP:
                self._walk(list(av), after)
            elif op is _sre.BRANCH:
                for alt in av[1]:
                    self._walk(list(alt), after)
            elif op is _sre.GROUPREF_EXISTS:
                self._walk(list(av[1]), after)
                if av[2] is not None:
                    self._walk(list(av[2]), after)
            elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
                direction, body = av
                self.looks_ahead = self.looks_ahead or direction == 1
                self._walk(list(body), self.everything)

    def _splits_iterations(self, seq: list[Any], follow: _Charset) -> str | None:
        """A choice inside a repeated group that the next character cannot settle, if any.

        ``follow`` holds what may come after ``seq`` inside one iteration: the start of the next.
        """
        for (op, av), after in zip(seq, self._afters(seq, follow), strict=True):
            if op in _VARIABLE:
                low, high, body = av
                body = list(body)
                body_first, _ = self._first(body)
                if low != high and body_first & after:
                    return (
                        "nested quantifiers can backtrack catastrophically: a repeat inside a repeated group "
                        "can also start its next iteration, as in '(a+)+' or '(\\w+\\s?)+'. Repeat a single "
                        "character class, or start each iteration with a separator: '[a-z]+(\\.[a-z]+)*'"
                    )
                inner = self._splits_iterations(body, body_first | after if high > 1 else after)
                if inner:
                    return inner
            elif op is _sre.BRANCH:
                starts = [self._then(list(alt), after) for alt in av[1]]
                for j, one in enumerate(starts):
                    if any(one & other for other in starts[j + 1 :]):
                        return (
                            "alternatives under a repeat overlap, as in '(a|aa)+': the regex can backtrack "
                            "catastrophically. Make the alternatives start differently, or use a character class"
                        )
                for alt in av[1]:
                    inner = self._splits_iterations(list(alt), after)
                    if inner:
                        return inner
            elif op is _sre.SUBPATTERN:
                inner = self._splits_iterations(list(av[3]), after)
                if inner:
                    return inner
            elif op is _sre.GROUPREF_EXISTS:
                for body in (av[1], av[2]):
                    inner = self._splits_iterations(list(body), after) if body is not None else None
                    if inner:
                        return inner
            # Possessive repeats and atomic groups never give back what they took: no choice to undo.
        return None


def _in_item(item: tuple[Any, Any], ch: int) -> bool:
    op, av = item
    if op is _sre.LITERAL:
        return ch == av
    if op is _sre.RANGE:
        return av[0] <= ch <= av[1]
    if op is _sre.CATEGORY:
        category = _CATEGORIES.get(av)
        return category is None or category.match(chr(ch)) is not None
    return True  # unknown item: assume it may match, which only makes the analysis stricter


def _case_variants(ch: int) -> set[int]:
    char = chr(ch)
    return {ch} | {ord(v) for v in (char.lower(), char.upper(), char.casefold()) if len(v) == 1}


def _collect_codes(seq: list[Any], codes: set[int]) -> None:
    """Add every literal and range bound (and a few range interior points) to the sample alphabet."""
    for op, av in seq:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL):
            codes.add(av)
        elif op is _sre.IN:
            for item_op, item_av in av:
                if item_op is _sre.LITERAL:
                    codes.add(item_av)
                elif item_op is _sre.RANGE:
                    low, high = item_av
                    codes.update(range(low, high + 1, max(1, (high - low) // 64)))
                    codes.add(high)
        elif op in _REPEATS:
            _collect_codes(list(av[2]), codes)
        elif op is _sre.SUBPATTERN:
            _collect_codes(list(av[3]), codes)
        elif op is _sre.ATOMIC_GROUP:
            _collect_codes(list(av), codes)
        elif op is _sre.BRANCH:
            for alt in av[1]:
                _collect_codes(list(alt), codes)
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            _collect_codes(list(av[1]), codes)
        elif op is _sre.GROUPREF_EXISTS:
            _collect_codes(list(av[1]), codes)
            if av[2] is not None:
                _collect_codes(list(av[2]), codes)


def _any_scoped_ignorecase(seq: list[Any]) -> bool:
    """Whether some ``(?i:...)`` group switches case-insensitivity on (then compare sets caselessly)."""
    for op, av in seq:
        if op is _sre.SUBPATTERN and (av[1] & re.IGNORECASE or _any_scoped_ignorecase(list(av[3]))):
            return True
        if op in _REPEATS and _any_scoped_ignorecase(list(av[2])):
            return True
        if op is _sre.BRANCH and any(_any_scoped_ignorecase(list(alt)) for alt in av[1]):
            return True
        if op is _sre.ATOMIC_GROUP and _any_scoped_ignorecase(list(av)):
            return True
    return False


# -- conditions -----------------------------------------------------------------------------


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
        matcher = compile_matcher(_as_regex(value))
        if matcher.error:
            raise ValueError(matcher.error)
        return value

    def model_post_init(self, context: Any, /) -> None:
        if not self.model_fields_set:
            raise ValueError("a condition needs at least one operator: " + ", ".join(OPERATORS))
        if self.matches is not None:
            self._matcher = compile_matcher(_as_regex(self.matches))

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


def _as_regex(text: str) -> str:
    return text if _REGEX_FORM.fullmatch(text) else f"/{text}/"


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


# -- evaluation -----------------------------------------------------------------------------


class Rule(Protocol):
    """What ``evaluate`` needs of a rule (``manifest.PolicyRule`` is one)."""

    @property
    def matcher(self) -> Matcher: ...
    @property
    def action(self) -> PolicyAction: ...
    @property
    def when(self) -> Mapping[str, Condition] | None: ...


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
            verdict = Verdict(action=rule.action, source=_layer(source), rule=rule.matcher.pattern)
            if outcome is True:
                return _strictest([*undecided, verdict])
            undecided.append(verdict)
    return _strictest([*undecided, _default(risk=risk, sensitive=sensitive, default_mode=default_mode)])


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


def _strictest(verdicts: list[Verdict]) -> Verdict:
    # max() keeps the first of equals, so on a tie the earlier rule is the one reported.
    return max(verdicts, key=lambda v: _STRICTNESS[v.action])


def is_hidden(
    *, qualified_name: str, path: str, project_rules: Sequence[Rule], connector_rules: Sequence[Rule]
) -> bool:
    """True when every call of the action is blocked whatever its arguments (SPEC 2.4).

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
