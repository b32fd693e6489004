"""Lifting by use (``discovery.use_lift``): the bound, the decay, closeness, and one principal's repetition."""

from __future__ import annotations

import pytest

from mcp_gateway.discovery import SearchResult
from mcp_gateway.discovery.use_lift import (
    FIRST_USE,
    HALF_LIFE_DAYS,
    LIFT_CAP,
    PER_PRINCIPAL,
    SAME_COSINE,
    SIMILAR_COSINE,
    Use,
    closeness,
    lifted,
    strengths,
    terms_of,
)
from mcp_gateway.vocabulary.model import Action, HttpBinding

DAY = 86400.0
ISSUE = terms_of("file issue broken build")


def action(path: str) -> Action:
    return Action(
        connector="gh",
        path=path,
        summary=path.replace(".", " "),
        binding=HttpBinding(method="POST", url=f"/{path.replace('.', '/')}"),
    )


def use(action: str = "gh.issues.create", who: str = "a", terms: frozenset[str] = ISSUE, age: float = 0.0) -> Use:
    return Use(action=action, who=who, terms=terms, vector=None, age=age)


def result(*scores: tuple[str, float]) -> SearchResult:
    return SearchResult([(action(path), score) for path, score in scores], "high")


def test_one_fresh_use_of_the_same_query_is_three_quarters_of_the_bound() -> None:
    assert strengths([use()], ISSUE, None) == {"gh.issues.create": pytest.approx(FIRST_USE)}
    found = lifted(result(("labels.create", 1.0), ("issues.create", 0.9)), {"gh.issues.create": FIRST_USE}, 10)
    assert [(a.path, s) for a, s in found.hits] == [
        ("issues.create", pytest.approx(0.9 + LIFT_CAP * FIRST_USE)),
        ("labels.create", 1.0),
    ]


def test_the_lift_is_bounded_whatever_the_evidence() -> None:
    many = [use(who=f"agent-{i}") for i in range(10)]
    strength = strengths(many, ISSUE, None)["gh.issues.create"]
    assert 0.99 < strength < 1.0
    # A clear answer stays first: the lift never exceeds LIFT_CAP of the best score.
    found = lifted(result(("labels.create", 1.0), ("issues.create", 0.65)), {"gh.issues.create": strength}, 10)
    assert [a.path for a, _ in found.hits] == ["labels.create", "issues.create"]
    assert found.hits[1][1] <= 0.65 + LIFT_CAP * 1.0


def test_a_use_decays_by_half_each_half_life() -> None:
    fresh = strengths([use()], ISSUE, None)["gh.issues.create"]
    old = strengths([use(age=HALF_LIFE_DAYS * DAY)], ISSUE, None)["gh.issues.create"]
    ancient = strengths([use(age=20 * HALF_LIFE_DAYS * DAY)], ISSUE, None)["gh.issues.create"]
    assert fresh == pytest.approx(FIRST_USE)
    assert old == pytest.approx(1 - (1 - FIRST_USE) ** 0.5)
    assert ancient < 1e-5


def test_one_principal_repeating_itself_counts_little_many_principals_more() -> None:
    loop = strengths([use() for _ in range(1000)], ISSUE, None)["gh.issues.create"]
    assert loop == pytest.approx(1 - (1 - FIRST_USE) ** PER_PRINCIPAL)
    three = strengths([use(who=w) for w in "abc"], ISSUE, None)["gh.issues.create"]
    assert three > loop


def test_a_loop_of_old_uses_ages_like_one_use_of_its_age() -> None:
    old = HALF_LIFE_DAYS * DAY
    looped = strengths([use(age=old) for _ in range(10)], ISSUE, None)["gh.issues.create"]
    assert looped == pytest.approx(strengths([use(age=old)], ISSUE, None)["gh.issues.create"])
    # A fresh use among them counts as fresh, the old ones adding nothing past the bound.
    renewed = strengths([use(age=old) for _ in range(10)] + [use()], ISSUE, None)["gh.issues.create"]
    assert renewed == pytest.approx(FIRST_USE)


def test_only_close_queries_count() -> None:
    assert strengths([use()], terms_of("delete repository"), None) == {}
    assert closeness(use(), terms_of("file flaky test suite"), None) == 0.0  # a quarter of the words: under the floor
    assert 0 < closeness(use(), terms_of("file issue broken build today"), None) < 1
    np = pytest.importorskip("numpy")

    def at(cosine: float) -> object:
        return np.array([cosine, (1 - cosine**2) ** 0.5], dtype=np.float32)

    vector_use = Use("gh.issues.create", "a", frozenset(), np.array([1.0, 0.0], dtype=np.float32), 0.0)
    # With vectors on both sides the words do not matter: the cosine does.
    assert closeness(vector_use, terms_of("delete repository"), at(SAME_COSINE + 0.05)) == 1.0
    middle = (SIMILAR_COSINE + SAME_COSINE) / 2
    assert closeness(vector_use, ISSUE, at(middle)) == pytest.approx(0.5, abs=1e-5)
    assert closeness(vector_use, ISSUE, at(SIMILAR_COSINE - 0.05)) == 0.0


def test_the_rankers_order_is_kept_where_it_is_not_its_scores() -> None:
    # The ranker puts an ask's cover or the asked kind's twin ahead of a higher score; a lift moves only
    # the lifted hit, and the rest keep that order.
    found = result(("worklog.add", 0.7), ("worklog.get", 0.9), ("reminder.create", 0.0), ("labels.list", 0.6))
    assert [a.path for a, _ in lifted(found, {}, 10).hits] == [
        "worklog.add",
        "worklog.get",
        "reminder.create",
        "labels.list",
    ]
    raised = lifted(found, {"gh.labels.list": FIRST_USE}, 10)  # 0.6 + 0.15 * 0.9 * 0.75: ahead of 0.7
    assert [a.path for a, _ in raised.hits] == ["labels.list", "worklog.add", "worklog.get", "reminder.create"]
    # A lift never moves a hit down, though the hits after it outscore it.
    assert [a.path for a, _ in lifted(found, {"gh.reminder.create": 0.2}, 3).hits] == [
        "worklog.add",
        "worklog.get",
        "reminder.create",
    ]


def test_nothing_to_lift_keeps_the_ranking_cut_to_the_limit() -> None:
    found = result(("a.one", 0.9), ("b.two", 0.8), ("c.three", 0.7))
    same = lifted(found, {}, 2)
    assert [a.path for a, _ in same.hits] == ["a.one", "b.two"]
    assert same.confidence == "high"
    # An action the ranker did not return is never added, however strong its uses.
    assert [a.path for a, _ in lifted(found, {"gh.elsewhere": 0.99}, 5).hits] == ["a.one", "b.two", "c.three"]
