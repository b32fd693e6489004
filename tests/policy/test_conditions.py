"""policy/conditions.py: ``when`` operators on one argument's value."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_gateway.policy import Condition

# -- conditions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "present", "value", "expected"),
    [
        ({"eq": "main"}, True, "main", True),
        ({"eq": "main"}, True, "Main", False),
        ({"eq": 1}, True, 1.0, True),
        ({"eq": 1}, True, True, False),  # a bool is not a number, whatever Python says
        ({"eq": 1}, True, "1", True),  # a plain decimal string is its number on the wire
        ({"eq": 1}, True, "1e0", None),  # a number to some APIs, text to others
        ({"eq": 1}, True, "one", False),
        ({"eq": "true"}, True, True, True),  # a bool goes out as its JSON spelling
        ({"eq": "btc"}, True, ["btc"], True),  # a one-element list goes out as its element
        ({"eq": "btc"}, True, ["btc", "eth"], None),  # which one the upstream reads is open
        ({"eq": "btc"}, True, {"v": "btc"}, None),
        ({"ne": "btc"}, True, ["btc"], False),
        ({"in": ["btc"]}, True, [["btc"]], True),
        ({"not_in": ["btc"]}, True, ["btc"], False),
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
        ({"gt": 0}, True, True, None),  # some APIs read true as 1
        ({"gt": 0}, True, None, False),
        ({"gt": 1000}, True, [5000], True),  # `amount=5000` in a query, like the number
        ({"gt": 1000}, True, [5000, 1], None),
        ({"gt": 1000}, True, [1, 2], False),
        ({"gt": 0}, True, {"v": 1}, None),
        ({"gt": 100}, True, "1000000", True),  # a plain decimal string is its number
        ({"gt": 100}, True, "5", False),
        ({"gt": 100}, True, " 5e3 ", None),  # undecided: a number to some APIs
        ({"gt": 100}, True, "1000abc", None),
        ({"lt": 100}, True, "abc", None),
        ({"matches": r"^v\d+$"}, True, "v12", True),
        ({"matches": r"^v\d+$"}, True, "v12x", False),
        ({"matches": r"^v\d+$"}, True, 12, False),
        ({"matches": r"^\d+$"}, True, 12, True),  # a number is read as its wire text
        ({"matches": r"^v\d+$"}, True, ["v12"], True),
        ({"matches": r"^v\d+$"}, True, {"a": "v12"}, None),
        ({"matches": r"^v\d+$"}, True, None, False),
        ({"matches": "/^MAIN$/i"}, True, "main", True),
        ({"matches": "/^MAIN$/"}, True, "main", False),
        ({"prefix": "refs/heads/"}, True, "refs/heads/main", True),
        ({"prefix": "refs/heads/"}, True, "refs/tags/v1", False),
        ({"prefix": "refs/heads/"}, True, "REFS/HEADS/main", False),
        ({"prefix": "1"}, True, 12, True),
        ({"prefix": "refs/heads/"}, True, ["refs/heads/main"], True),
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
