"""``fields``: projection to dot paths, and the paths that matched nothing."""

from __future__ import annotations

from mcp_gateway.primitives.projection import project, unmatched

ISSUES = [{"number": 1, "title": "a", "user": {"login": "x"}}, {"number": 2, "title": "b", "labels": []}]


def test_project_keeps_the_paths_asked_for_on_each_element() -> None:
    assert project(ISSUES, ["number", "user.login"]) == [{"number": 1, "user": {"login": "x"}}, {"number": 2}]


def test_unmatched_names_the_paths_that_found_nothing() -> None:
    assert unmatched(ISSUES, ["number", "user.login", "titel", "user.name"]) == ["titel", "user.name"]
    assert unmatched({"id": 1, "owner": {"login": "x"}}, ["id", "owner.login", "owner.id"]) == ["owner.id"]
    assert unmatched({"id": 1}, ["id.deeper"]) == ["id.deeper"]
    assert unmatched([], ["anything"]) == []  # nothing to contradict the path
    assert unmatched("text", ["a"]) == ["a"]
