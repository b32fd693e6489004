"""A goal read by meaning: the query's vector against the outcomes ``_effects`` knows (``_outcomes``)."""

from __future__ import annotations

import anyio
import pytest

from mcp_gateway.discovery import _outcomes
from mcp_gateway.discovery._outcomes import LIFT, OUTCOMES, PER_OUTCOME, Outcomes
from mcp_gateway.discovery.dense import EmbeddingProvider
from tests.discovery.conftest import embedded_actions
from tests.discovery.test_effects import _operations

np = pytest.importorskip("numpy")

_CALLED_OFF = OUTCOMES.index("cancel it, call it off")


def one_hot(position: int) -> object:
    vector = np.zeros(len(OUTCOMES) + 1, dtype=np.float32)
    vector[position] = 1.0
    return vector


def test_every_outcome_is_listed_once_and_each_action_achieves_what_effects_says() -> None:
    assert len(OUTCOMES) == len(set(OUTCOMES)) > 50
    (delete, poll) = _operations(
        ("meeting_delete", "delete", "/meetings/{id}", "Delete a meeting"),
        ("meeting_poll_delete", "delete", "/meetings/{id}/polls/{poll}", "Delete a meeting poll"),
    )
    outcomes = Outcomes(np.eye(len(OUTCOMES), len(OUTCOMES) + 1, dtype=np.float32))
    assert _CALLED_OFF in outcomes.achieved(delete)
    assert _CALLED_OFF not in outcomes.achieved(poll)  # a poll is deleted, not the meeting


def test_an_outcome_standing_out_lifts_the_best_two_achieving_it() -> None:
    actions = _operations(
        ("meetings_delete", "delete", "/meetings/{id}", "Delete a meeting"),
        ("events_delete", "delete", "/events/{id}", "Delete an event"),
        ("webinars_delete", "delete", "/webinars/{id}", "Delete a webinar"),
        ("meetings_get", "get", "/meetings/{id}", "Get a meeting"),
    )
    by_name = {action.qualified_name: action for action in actions}
    scores = {
        "work.meetings_delete": 0.9,
        "work.events_delete": 0.5,
        "work.webinars_delete": 0.4,
        "work.meetings_get": 1.0,
    }
    outcomes = Outcomes(np.eye(len(OUTCOMES), len(OUTCOMES) + 1, dtype=np.float32))
    lifted = outcomes.lifts(one_hot(_CALLED_OFF), scores, by_name)
    assert PER_OUTCOME == 2
    assert lifted == {"work.meetings_delete": LIFT, "work.events_delete": LIFT}  # not the third, nor the read
    # A query near no outcome more than the rest asks for none.
    even = np.full(len(OUTCOMES) + 1, 1.0, dtype=np.float32) / np.sqrt(len(OUTCOMES) + 1)
    assert outcomes.asked(even) == frozenset()
    assert outcomes.lifts(even, scores, by_name) == {}


@pytest.mark.hybrid
def test_a_goal_worded_by_its_outcome_reaches_the_operation_achieving_it(
    provider: EmbeddingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "Cancel lunch" shares "cancel" with two other operations and "lunch" with a third; only calling an
    # event off is what it asks.
    actions = _operations(
        ("events_delete", "delete", "/calendars/{calendarId}/events/{eventId}", "Deletes an event"),
        ("events_insert", "post", "/calendars/{calendarId}/events", "Creates an event"),
        ("events_list", "get", "/calendars/{calendarId}/events", "Returns events on the specified calendar"),
        ("tasks_cancel", "post", "/tasks/{id}/cancel", "Cancel a task"),
        ("orders_cancel", "post", "/orders/{id}/cancel", "Cancel an order"),
        ("lunch_menus_get", "get", "/menus/{id}", "Get the lunch menu"),
        ("users_get", "get", "/users/{id}", "Get a user"),
    )
    index, search = embedded_actions(provider, "work", actions)

    def first_three() -> list[str]:
        found = anyio.run(lambda: search.find(index, "cancel lunch with Mark on Thursday", limit=3))
        return [action.path for action, _ in found.hits]

    assert "events_delete" in first_three()
    monkeypatch.setattr(_outcomes, "LIFT", 0.0)
    assert "events_delete" not in first_three()
