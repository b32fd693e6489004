"""policy/verdict.py: the layered verdict, undecided conditions on the strict side, visibility, effective risk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from mcp_gateway.policy import Condition, Matcher, compile_matcher, evaluate, is_hidden
from mcp_gateway.vocabulary.model import PolicyAction, Risk, Verdict


@dataclass(frozen=True)
class Rule:
    """The smallest thing ``evaluate`` accepts as a rule (manifest.PolicyRule is the real one)."""

    match: str
    action: PolicyAction
    when: dict[str, Condition] | None = None
    separate_approver: bool = False

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


# -- evaluate: layers and sources -------------------------------------------------------------


def test_a_rule_asking_for_a_separate_approver_says_so_in_its_verdict() -> None:
    def verdict(*rules: Rule, risk: Risk = "write") -> Verdict:
        return evaluate(
            qualified_name="github.issues.create",
            path="issues.create",
            risk=risk,
            args={},
            project_rules=list(rules),
            connector_rules=[],
            sensitive=False,
            default_mode="risk",
        )

    assert verdict(Rule("github.*", "require_approval", separate_approver=True)).separate_approver
    assert not verdict(Rule("github.*", "require_approval")).separate_approver
    assert not verdict().separate_approver  # the defaults never ask for one
    # Only an approval can need an approver: the flag on any other rule says nothing.
    assert not verdict(Rule("github.*", "always_run", separate_approver=True)).separate_approver


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
    assert decide(project=project, args={"amount": " 5"}) == ("block", "project", "*")
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
    from mcp_gateway.policy import effective_risk
    from mcp_gateway.vocabulary.model import Action, HttpBinding, RequestBinding

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
