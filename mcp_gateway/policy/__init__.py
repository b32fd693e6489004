"""Policy as pure functions: three layers, first hit wins, every verdict says why.

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

The package: ``verdict`` (``evaluate``, ``is_hidden``, ``effective_risk``), ``patterns`` (``Matcher``,
``compile_matcher``, ``MAX_VALUE_CHARS``), ``conditions`` (``Condition``, ``OPERATORS``),
``regex_shape`` (the backtracking analysis, imported by the first regex compiled) and ``regex_syntax``
(the parse tree it reads). Import from the package: ``from mcp_gateway.policy import X``.
"""

from .conditions import OPERATORS, Condition
from .patterns import MAX_VALUE_CHARS, Matcher, compile_matcher
from .verdict import Rule, effective_risk, evaluate, is_hidden, strictest

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
    "strictest",
]
