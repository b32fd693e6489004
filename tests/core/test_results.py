"""``clean_result``: an ``ok`` answer's strings cleaned (and capped), copied only when something changed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_gateway.core.results import clean_result
from mcp_gateway.primitives.sanitize import clean_json
from mcp_gateway.vocabulary.model import Ok

DATA: list[Any] = [
    None,
    42,
    "plain text",
    "ansi \x1b[31mred\x1b[0m",
    {"id": 1, "name": "widget", "tags": ["a", "b"], "ok": True, "price": 1.5},
    {"name": "line\nbreak", "path": "C:\\dir"},
    {"zero\u200bwidth": "tag \U000e0041 smuggled", "del": "a\x7fb"},
    [{"a": "caf\u00e9"}, {"b": "\r\n"}],
    {"nested": {"deep": [[["\u202eevil"]]]}},
]


@pytest.mark.parametrize("data", DATA)
def test_ok_data_is_cleaned_like_clean_json(data: Any) -> None:
    result = Ok(http_status=200, data=data)
    cleaned = clean_result(result)
    assert isinstance(cleaned, Ok)
    assert cleaned.data == clean_json(data)
    assert json.dumps(cleaned.data) == json.dumps(clean_json(data))


def test_an_answer_with_nothing_to_clean_is_not_copied() -> None:
    result = Ok(http_status=200, data={"id": 1, "name": "widget", "tags": ["a", "b"]})
    assert clean_result(result) is result
    assert clean_result(result, max_result_chars=10_000) is result


@pytest.mark.parametrize("data", [{"text": "x" * 50}, {"text": "é\u200b" * 30}, "y" * 50])
def test_a_long_answer_is_cut_to_max_result_chars(data: Any) -> None:
    cleaned = clean_result(Ok(http_status=200, data=data), max_result_chars=20)
    assert isinstance(cleaned, Ok)
    full = clean_json(data)
    text = full if isinstance(full, str) else json.dumps(full, ensure_ascii=False)
    assert cleaned.data == text[:20] and cleaned.truncated


def test_numbers_json_cannot_carry_become_null_and_the_answer_says_so() -> None:
    # An upstream's {"a": NaN, "b": Infinity} reached the agent as nulls without a word.
    parsed = json.loads('{"a": NaN, "b": [Infinity, -Infinity, 1e400], "c": 1.5, "s": "NaN and Infinity"}')
    cleaned = clean_result(Ok(http_status=200, data=parsed), max_result_chars=10_000)
    assert isinstance(cleaned, Ok) and cleaned.non_finite_replaced is True
    assert cleaned.data == {"a": None, "b": [None, None, None], "c": 1.5, "s": "NaN and Infinity"}
    shown = cleaned.model_dump(mode="json", exclude_none=True)
    assert shown["non_finite_replaced"] is True and json.dumps(shown["data"], allow_nan=False)
    # Only the words, in a string: nothing replaced, nothing said, nothing copied.
    words = Ok(http_status=200, data={"s": "NaN", "t": ["Infinity"]})
    assert clean_result(words) is words and words.non_finite_replaced is None
