"""The dense model's tuning requests (``scripts/tuning``): every row names an action of an API whose
description ``sources.json`` pins, no request is written twice for one action, and the style rows say
which style they are. The held-out set's claim that no tuning used its APIs is checked beside it
(``test_heldout_intents.py``)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

TUNING = Path(__file__).resolve().parent.parent / "scripts" / "tuning"
STYLES = {"indirect", "unnamed"}


def _rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _apis(folder: Path) -> set[str]:
    return {source["api"] for source in json.loads((folder / "sources.json").read_text(encoding="utf-8"))}


def _slugs(folder: Path) -> set[str]:
    return {source["slug"] for source in json.loads((folder / "sources.json").read_text(encoding="utf-8"))}


@pytest.mark.parametrize("folder", [TUNING, TUNING / "more"], ids=["shipped", "more"])
def test_every_request_names_an_action_of_a_pinned_description(folder: Path) -> None:
    # ``more`` holds requests for its own APIs and, in other styles, for the shipped ones.
    slugs = _slugs(folder) | _slugs(TUNING)
    files = [path for path in (folder / "requests.jsonl.gz", folder / "styles.jsonl.gz") if path.exists()]
    rows = [row for path in files for row in _rows(path)]
    assert rows
    strays = sorted({row["name"] for row in rows if row["name"].split(".", 1)[0] not in slugs})
    assert not strays, f"actions of APIs sources.json does not pin: {strays[:5]}"
    assert all(isinstance(row["request"], str) and row["request"].strip() for row in rows)
    repeated = [key for key, count in Counter((r["name"], r["request"].lower()) for r in rows).items() if count > 1]
    assert not repeated, f"written twice: {repeated[:3]}"


def test_style_rows_are_goals_or_requests_that_never_name_the_product() -> None:
    rows = _rows(TUNING / "more" / "styles.jsonl.gz")
    assert Counter(row["style"] for row in rows).keys() == STYLES
    products = {api.capitalize() for api in _apis(TUNING) | _apis(TUNING / "more")}
    # A product's own name in an "unnamed" row would teach the model to lean on it. (Capitalized, as a
    # name is written: "resend the email" is a verb.)
    named = [
        row
        for row in rows
        if row["style"] == "unnamed" and products & {word.strip(".,!?'\"") for word in row["request"].split()}
    ]
    assert not named, named[:3]
