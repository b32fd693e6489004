"""The policy package as pure functions: matchers, conditions, the layered verdict and visibility."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_gateway import policy
from mcp_gateway.model import PolicyAction, Risk
from mcp_gateway.policy import MAX_VALUE_CHARS, Condition, Matcher, compile_matcher, evaluate, is_hidden


@dataclass(frozen=True)
class Rule:
    """The smallest thing ``evaluate`` accepts as a rule (manifest.PolicyRule is the real one)."""

    match: str
    action: PolicyAction
    when: dict[str, Condition] | None = None

    @property
    def matcher(self) -> Matcher:
        return compile_matcher(self.match)


def rule(match: str, action: PolicyAction, **when: dict[str, Any]) -> Rule:
    return Rule(match, action, {k: Condition.model_validate(v) for k, v in when.items()} or None)


def decide(
    *,
    project: list[Rule] | None = None,
    connector: list[Rule] | None = None,
    args: dict[str, Any] | None = None,
    risk: Risk = "write",
    sensitive: bool = False,
    mode: str = "risk",
    name: str = "github.issues.create",
) -> tuple[str, str, str | None]:
    verdict = evaluate(
        qualified_name=name,
        path=name.split(".", 1)[1],
        risk=risk,
        args=args or {},
        project_rules=project or [],
        connector_rules=connector or [],
        sensitive=sensitive,
        default_mode=mode,
    )
    return verdict.action, verdict.source, verdict.rule


# -- globs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("issues.create", "issues.create", True),
        ("issues.create", "xissues.create", False),
        ("issues.create", "issues.created", False),
        ("issues.create", "issues_create", False),  # '.' in a glob is a literal dot
        ("issues.create", "Issues.CREATE", True),
        ("ISSUES.*", "issues.list", True),
        ("*.delete*", "github.repos.delete", True),  # '*' crosses dots
        ("*.delete*", "github.repos.delete_ref", True),
        ("*.delete*", "github.repos.undelete", False),
        ("github.*", "github.repos.issues.comments.list", True),
        ("github.*", "githubx.repos.list", False),
        ("issues.?reate", "issues.create", True),
        ("issues.?reate", "issues.reate", False),
        ("[ab]*", "admin.purge", True),
        ("[ab]*", "charges.create", False),
        ("*", "anything.at.all", True),
    ],
)
def test_glob_is_anchored_case_insensitive_and_star_crosses_dots(pattern: str, name: str, expected: bool) -> None:
    assert compile_matcher(pattern).matches(name) is expected


def test_module_docstring_documents_that_star_crosses_dots() -> None:
    assert policy.__doc__ is not None and "including dots" in policy.__doc__


def test_many_stars_do_not_backtrack_catastrophically() -> None:
    started = time.perf_counter()
    assert not compile_matcher("*a*a*a*a*a*a*a*a*b").matches("a" * 4000)
    assert time.perf_counter() - started < 0.5


# -- regexes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (r"refunds", "stripe.refunds.create"),
        (r"^stripe\.refunds\.", "stripe.refunds.create"),
        (r"^stripe\.refunds\.", "xstripe.refunds.create"),
        (r"create$", "issues.create"),
        (r"create$", "issues.create_many"),
        (r"^a$", "a"),
        (r"^a$", "ab"),
        (r"^a|b$", "ax"),  # alternation binds loosest: (^a)|(b$)
        (r"^a|b$", "xb"),
        (r"^a|b$", "bx"),
        (r"(get|list)_.*", "repos.list_for_org"),
        (r"(get|list)_.*", "repos.create"),
        (r"a.b", "a\nb"),  # '.' does not cross a newline without the s flag
        (r"a$", "a\n"),
        (r"\bdrop\b", "please drop it"),
        (r"\bdrop\b", "dropped"),
        (r"^$", ""),
    ],
)
def test_regex_is_searched_exactly_as_python_searches(body: str, text: str) -> None:
    assert compile_matcher(f"/{body}/").matches(text) is (re.search(body, text) is not None)


def test_regex_is_case_sensitive_unless_flagged_i() -> None:
    assert not compile_matcher(r"/^stripe\.refunds\./").matches("Stripe.Refunds.create")
    assert compile_matcher(r"/^stripe\.refunds\./i").matches("Stripe.Refunds.create")


def test_regex_flags_s_and_m() -> None:
    assert compile_matcher("/a.b/s").matches("a\nb")
    assert compile_matcher("/^b$/m").matches("a\nb\nc")
    assert not compile_matcher("/^b$/").matches("a\nb\nc")


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("/([a-z/", "invalid regex"),
        ("/a(/", "invalid regex"),
        ("/foo/x", "unknown regex flag 'x'"),
        ("/foo/I", "unknown regex flag 'I'"),
        ("//", "empty regex"),
    ],
)
def test_unusable_regex_never_matches_and_says_why(pattern: str, says: str) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.regex is None and matcher.error is not None and says in matcher.error
    for text in ("", "a", "foo", "([a-z", pattern):
        assert not matcher.matches(text)
        assert matcher.check(text) is False


@pytest.mark.parametrize(
    "pattern",
    [
        "/(a+)+$/",
        "/(.*)*x/",
        r"/(\w+\s?)+$/",
        r"/([a-zA-Z]+)*$/",
        r"/(\d+)*$/",
        r"/(x+x+)+y/",
        r"/^(([a-z])+.)+[A-Z]([a-z])+$/",
        "/(.*a){12}/",
        "/(a|aa)+$/",
        "/(a|a?)+$/",
        "/(a|a)+$/",
        r"/(?:\w+|\d)+$/",
        "/(?i:(a+)+)$/",
    ],
)
def test_catastrophic_shapes_are_refused(pattern: str) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.regex is None
    assert matcher.error is not None and "catastrophic" in matcher.error
    assert not matcher.matches("a" * 30 + "!")


@pytest.mark.parametrize(
    "pattern",
    [
        r"/^stripe\.refunds\./i",
        "/(get|list)_.*/",
        "/(get|list)+/",
        r"/^[a-z]+(\.[a-z]+)*$/",
        r"/^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/",
        r"/(?:[^/]+/)*[^/]+/",
        r"/(\d{3}-)+\d{4}/",
        r"/(\s*,\s*\w+)*/",
        r"/^[\w.+-]+@[\w-]+(\.[\w-]+)+$/",
        r"/^v\d+(\.\d+){0,2}$/",
        r"/\bdrop\s+table\b/i",
        r"/(?:ab|cd)+/",
        r"/(?:\w|\d)+$/",  # Python's parser folds one-character alternatives into a set
        "/(a++)+b/",  # possessive: never gives back, so no choice to undo
        "/.*delete.*/",
        "/a.*b.*c/",
    ],
)
def test_ordinary_patterns_compile(pattern: str) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.error is None and matcher.regex is not None


def test_analysis_of_a_long_pattern_is_fast() -> None:
    compile_matcher.cache_clear()
    started = time.perf_counter()
    assert compile_matcher("/" + "a?" * 2000 + "b/").error is None
    assert compile_matcher("/^" + "[a-z]*," * 300 + "$/").error is None
    assert time.perf_counter() - started < 1.0


def test_compiled_matchers_are_cached() -> None:
    assert compile_matcher("/^issues\\./") is compile_matcher("/^issues\\./")


def test_read_length_shrinks_with_the_number_of_overlapping_repeats() -> None:
    assert compile_matcher("/^[a-z]+$/").max_chars == MAX_VALUE_CHARS
    assert compile_matcher("/.*x/").max_chars == 2048
    assert compile_matcher("/a.*b.*c/").max_chars == 161
    refused = compile_matcher("/.*.*.*.*x/")
    assert refused.regex is None and refused.error is not None and "overlapping repeats" in refused.error


@pytest.mark.parametrize(
    ("pattern", "unit"),
    [
        (r"/\s*\s*x/", " "),
        (r"/(\w+)\s(\w+)\s*$/", "a"),
        (r"/[a-z]+[0-9]+[a-z]+[0-9]+!/", "a1"),
        ("/a.*b.*c.*d/", "abc"),
        ("/.*.*=.*;/", "="),
    ],
)
def test_worst_case_text_for_an_accepted_pattern_stays_fast(pattern: str, unit: str) -> None:
    """Polynomial backtracking is bounded by reading fewer characters, not by refusing the pattern."""
    matcher = compile_matcher(pattern)
    assert matcher.regex is not None
    text = (unit * MAX_VALUE_CHARS)[: matcher.max_chars]
    started = time.perf_counter()
    matcher.check(text)
    assert time.perf_counter() - started < 0.5


def test_too_long_text_is_undecided_unless_a_match_was_found_well_inside() -> None:
    megabyte = "a" * 1_000_000
    started = time.perf_counter()
    assert compile_matcher("/^abc/").check("abc" + megabyte) is True
    assert compile_matcher("/drop/i").check("DROP " + megabyte) is True
    assert compile_matcher("/xyz$/").check(megabyte + "xyz") is None
    assert compile_matcher("/drop/").check(megabyte + "drop") is None  # padding cannot hide it
    assert compile_matcher("/^[a-z]+$/").check(megabyte) is None
    assert compile_matcher("/a.*b.*c/").check("ab" * 500_000) is None
    # A lookahead may look past the cut, so even an early match proves nothing.
    assert compile_matcher("/(?=a)a/").check(megabyte) is None
    assert compile_matcher("*").check(megabyte) is None
    assert time.perf_counter() - started < 0.5


# -- conditions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "present", "value", "expected"),
    [
        ({"eq": "main"}, True, "main", True),
        ({"eq": "main"}, True, "Main", False),
        ({"eq": 1}, True, 1.0, True),
        ({"eq": 1}, True, True, False),  # a bool is not a number, whatever Python says
        ({"eq": 1}, True, "1", False),
        ({"eq": None}, True, None, True),
        ({"eq": [1, "a"]}, True, [1, "a"], True),
        ({"eq": [1]}, True, [True], False),
        ({"eq": {"a": 1}}, True, {"a": 1}, True),
        ({"ne": "main"}, True, "dev", True),
        ({"ne": "main"}, True, "main", False),
        ({"ne": 1}, True, True, True),
        ({"in": ["main", "master"]}, True, "master", True),
        ({"in": ["main", "master"]}, True, "dev", False),
        ({"in": [0, 1]}, True, False, False),
        ({"not_in": ["main"]}, True, "dev", True),
        ({"not_in": ["main"]}, True, "main", False),
        ({"not_in": [1]}, True, True, True),
        ({"gt": 10000}, True, 10001, True),
        ({"gt": 10000}, True, 10000, False),
        ({"gt": 10000}, True, 10000.5, True),
        ({"gte": 10000}, True, 10000, True),
        ({"gte": 10000}, True, 9999.99, False),
        ({"lt": 0.5}, True, 0.25, True),
        ({"lt": 0.5}, True, 0.5, False),
        ({"lte": 0.5}, True, 0.5, True),
        ({"lte": -1}, True, 0, False),
        ({"gt": 0}, True, True, False),  # bool is not a number
        ({"gt": 0}, True, None, False),
        ({"gt": 0}, True, [1], False),
        ({"gt": 0}, True, {"v": 1}, False),
        ({"gt": 100}, True, "1000000", None),  # undecided: an upstream may read it as a number
        ({"lt": 100}, True, "abc", None),
        ({"matches": r"^v\d+$"}, True, "v12", True),
        ({"matches": r"^v\d+$"}, True, "v12x", False),
        ({"matches": r"^v\d+$"}, True, 12, False),
        ({"matches": "/^MAIN$/i"}, True, "main", True),
        ({"matches": "/^MAIN$/"}, True, "main", False),
        ({"prefix": "refs/heads/"}, True, "refs/heads/main", True),
        ({"prefix": "refs/heads/"}, True, "refs/tags/v1", False),
        ({"prefix": "refs/heads/"}, True, "REFS/HEADS/main", False),
        ({"prefix": "1"}, True, 12, False),
        ({"exists": True}, True, None, True),
        ({"exists": True}, False, None, False),
        ({"exists": False}, False, None, True),
        ({"exists": False}, True, "x", False),
        ({"exists": True, "gt": 5}, True, 6, True),
        ({"exists": True, "gt": 5}, True, 4, False),
        ({"gt": 5, "lt": 10}, True, 7, True),
        ({"gt": 5, "lt": 10}, True, 10, False),
    ],
)
def test_condition_operators(spec: dict[str, Any], present: bool, value: Any, expected: bool | None) -> None:
    assert Condition.model_validate(spec).holds(present, value) is expected


@pytest.mark.parametrize(
    "spec",
    [{"eq": "x"}, {"ne": "x"}, {"in": ["x"]}, {"not_in": ["x"]}, {"gt": 1}, {"matches": "x"}, {"prefix": "x"}],
)
def test_missing_argument_fails_every_operator_but_exists_false(spec: dict[str, Any]) -> None:
    assert Condition.model_validate(spec).holds(False, None) is False


def test_a_megabyte_value_is_checked_quickly_and_correctly() -> None:
    value = "refs/heads/" + "x" * 1_000_000
    started = time.perf_counter()
    assert Condition.model_validate({"prefix": "refs/heads/"}).holds(True, value) is True
    assert Condition.model_validate({"prefix": "refs/tags/"}).holds(True, value) is False
    assert Condition.model_validate({"matches": "^refs/heads/"}).holds(True, value) is True
    assert Condition.model_validate({"matches": "^refs/tags/"}).holds(True, value) is None
    assert Condition.model_validate({"eq": value}).holds(True, value) is True
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({}, "at least one operator"),
        ({"greater": 5}, "Extra inputs"),
        ({"in_": [1]}, "Extra inputs"),  # the manifest spelling is 'in'
        ({"gt": None}, "not null"),
        ({"gt": "10000"}, "needs a number"),
        ({"gt": True}, "needs a number"),
        ({"gt": float("nan")}, "finite"),
        ({"in": 5}, "valid list"),
        ({"matches": "(a+)+$"}, "catastrophic"),
        ({"matches": "/[a-/"}, "invalid regex"),
        ({"exists": "maybe"}, "valid boolean"),
    ],
)
def test_condition_refuses_malformed_operators(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(says)):
        Condition.model_validate(spec)


# -- evaluate: layers and sources -------------------------------------------------------------


def test_project_rule_wins_over_connector_rule() -> None:
    got = decide(project=[rule("github.issues.*", "always_run")], connector=[rule("issues.create", "block")])
    assert got == ("always_run", "project", "github.issues.*")


def test_project_rules_match_qualified_names_and_connector_rules_relative_paths() -> None:
    assert decide(project=[rule("issues.create", "block")])[1] == "risk_default"
    assert decide(connector=[rule("github.issues.create", "block")])[1] == "risk_default"
    assert decide(connector=[rule("issues.create", "block")]) == ("block", "connector", "issues.create")


def test_first_hit_wins_within_a_layer() -> None:
    rules = [rule("*.create", "always_run"), rule("github.*", "block")]
    assert decide(project=rules) == ("always_run", "project", "*.create")
    assert decide(project=rules[::-1]) == ("block", "project", "github.*")


def test_sensitive_asks_even_for_reads_and_beats_allow_all() -> None:
    assert decide(risk="read", sensitive=True) == ("require_approval", "sensitive", None)
    assert decide(risk="read", sensitive=True, mode="allow_all") == ("require_approval", "sensitive", None)
    # ... but an explicit rule still comes first.
    assert decide(connector=[rule("issues.*", "always_run")], sensitive=True)[1] == "connector"


def test_allow_all_runs_everything_without_a_rule() -> None:
    assert decide(risk="destructive", mode="allow_all") == ("always_run", "allow_all", None)


@pytest.mark.parametrize(
    ("risk", "action"), [("read", "always_run"), ("write", "require_approval"), ("destructive", "require_approval")]
)
def test_risk_default(risk: Risk, action: str) -> None:
    assert decide(risk=risk) == (action, "risk_default", None)


def test_unknown_default_mode_counts_as_risk() -> None:
    assert decide(risk="write", mode="yolo") == ("require_approval", "risk_default", None)


def test_a_rule_whose_conditions_fail_falls_through() -> None:
    project = [rule("github.*", "block", amount={"gt": 100})]
    connector = [rule("issues.create", "always_run")]
    assert decide(project=project, connector=connector, args={"amount": 5}) == (
        "always_run",
        "connector",
        "issues.create",
    )
    assert decide(project=project, connector=connector, args={"amount": 500})[:2] == ("block", "project")
    assert decide(project=project, connector=connector, args={})[:2] == ("always_run", "connector")


def test_broken_regex_rule_never_matches() -> None:
    assert decide(project=[rule("/(a+)+$/", "block"), rule("/[/", "block")], risk="read")[1] == "risk_default"


def test_spec_example_rules() -> None:
    project = [rule("*.delete*", "block"), rule(r"/^stripe\.refunds\./i", "require_approval", amount={"gt": 10000})]
    assert decide(project=project, name="github.repos.delete")[:2] == ("block", "project")
    refund = {"name": "stripe.Refunds.create", "project": project, "mode": "allow_all"}
    assert decide(**refund, args={"amount": 20000})[:2] == ("require_approval", "project")  # type: ignore[arg-type]
    assert decide(**refund, args={"amount": 500}) == ("always_run", "allow_all", None)  # type: ignore[arg-type]


# -- evaluate: undecided conditions settle on the strict side -------------------------------------


def test_numeric_string_cannot_slip_past_a_numeric_gate() -> None:
    project = [rule("github.*", "require_approval", amount={"gt": 100}), rule("*", "always_run")]
    assert decide(project=project, args={"amount": "1000000"})[:2] == ("require_approval", "project")
    assert decide(project=project, args={"amount": 50}) == ("always_run", "project", "*")


def test_padding_a_value_cannot_slip_past_a_block() -> None:
    project = [rule("*", "block", sql={"matches": r"/\bdrop\b/i"})]
    padded = " " * 100_000 + "DROP TABLE users"
    assert decide(project=project, args={"sql": padded}, mode="allow_all")[:2] == ("block", "project")
    assert decide(project=project, args={"sql": "select 1"}, mode="allow_all")[1] == "allow_all"


def test_an_undecided_always_run_does_not_grant() -> None:
    project = [rule("*", "always_run", name={"matches": "^[a-z]+$"})]
    assert decide(project=project, args={"name": "a" * 100_000}) == ("require_approval", "risk_default", None)
    assert decide(project=project, args={"name": "abc"}) == ("always_run", "project", "*")


def test_undecided_rule_yields_to_a_stricter_later_outcome() -> None:
    project = [rule("*", "require_approval", amount={"gt": 100}), rule("github.*", "block")]
    assert decide(project=project, args={"amount": "5"}) == ("block", "project", "github.*")


def test_undecided_rule_kept_when_it_is_the_strictest_and_the_earlier_wins_a_tie() -> None:
    project = [rule("*", "block", amount={"gt": 100}), rule("github.*", "always_run")]
    assert decide(project=project, args={"amount": "5"}) == ("block", "project", "*")
    twice = [rule("*", "block", a={"gt": 1}), rule("github.*", "block", b={"gt": 1})]
    assert decide(project=twice, args={"a": "x", "b": "y"}) == ("block", "project", "*")


# -- is_hidden --------------------------------------------------------------------------------


def hidden(project: list[Rule] | None = None, connector: list[Rule] | None = None) -> bool:
    return is_hidden(
        qualified_name="github.repos.delete",
        path="repos.delete",
        project_rules=project or [],
        connector_rules=connector or [],
    )


def test_unconditional_block_hides() -> None:
    assert hidden(project=[rule("*.delete", "block")])
    assert hidden(connector=[rule("repos.delete", "block")])


def test_conditional_block_stays_visible() -> None:
    assert not hidden(project=[rule("*.delete", "block", force={"eq": True})])


def test_conditional_blocks_before_an_unconditional_block_still_hide() -> None:
    assert hidden(project=[rule("*", "block", force={"eq": True}), rule("*.delete", "block")])


def test_earlier_run_or_approval_rule_shadows_a_later_block() -> None:
    assert not hidden(project=[rule("*.delete", "always_run"), rule("*", "block")])
    assert not hidden(project=[rule("*.delete", "require_approval")], connector=[rule("repos.*", "block")])
    assert not hidden(project=[rule("*", "always_run", dry_run={"eq": True}), rule("*", "block")])


def test_nothing_matching_or_a_broken_pattern_hides_nothing() -> None:
    assert not hidden()
    assert not hidden(project=[rule("issues.*", "block")])
    assert not hidden(project=[rule("/(a+)+/", "block")])


def test_a_request_calls_effective_risk_is_its_methods() -> None:
    from mcp_gateway.model import Action, HttpBinding, RequestBinding
    from mcp_gateway.policy import effective_risk

    request = Action(connector="api", path="request", risk="write", binding=RequestBinding())
    assert effective_risk(request, {"method": "GET", "path": "/x"}) == "read"
    assert effective_risk(request, {"method": "head"}) == "read"
    assert effective_risk(request, {"method": "DELETE"}) == "destructive"
    assert effective_risk(request, {"method": "PATCH"}) == "write"
    assert effective_risk(request, {}) == "write"  # no method (describe, discover): the static, stricter risk
    assert effective_risk(request, {"method": 7}) == "write"
    curated = Action(connector="api", path="items.get", risk="read", binding=HttpBinding(method="GET", url="/i"))
    assert effective_risk(curated, {"method": "DELETE"}) == "read"  # only the request action reads its args
    verdict = evaluate(
        qualified_name="api.request",
        path="request",
        risk=effective_risk(request, {"method": "GET"}),
        args={"method": "GET"},
        project_rules=[],
        connector_rules=[],
        sensitive=False,
        default_mode="risk",
    )
    assert verdict.action == "always_run"
