"""The hand-written guesses over four APIs no other set uses (tests/data/intents/outside_guesses/): each a
guess labelled with real operations of its API; and a floor on how often the first suggestion is right.

The figures come from ``python scripts/bench_heldout.py --sets outside-guesses``; docs/discovery.md has them.
"""

from __future__ import annotations

import json
from functools import cache

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.vocabulary.model import Action
from scripts.bench_discover_data import API_LOADERS
from scripts.bench_heldout import (
    FRESH_SPECS,
    GUESSES,
    OUTSIDE_DIR,
    OUTSIDE_SPECS,
    catalog_guess_apis,
    heldout_apis,
    operation_of,
    outside_catalogs,
)
from tests.support.guesses import first_right


def _rows() -> list[dict[str, object]]:
    return json.loads((OUTSIDE_DIR / f"{GUESSES}.json").read_text(encoding="utf-8"))


@cache
def _catalogs() -> dict[str, tuple[Action, ...]]:
    return outside_catalogs()


@cache
def _index() -> DiscoveryIndex:
    index = DiscoveryIndex()
    for slug, actions in _catalogs().items():
        index.replace_connector(slug, list(actions))
    return index


def test_the_set_is_large_and_over_apis_no_other_set_uses() -> None:
    """The tuned benchmarks' ``gitlab`` is GitLab's MCP server (nine tools), not its REST description."""
    assert len(_rows()) >= 90
    assert not set(OUTSIDE_SPECS) & {*heldout_apis(), *catalog_guess_apis(), *FRESH_SPECS}
    assert set(OUTSIDE_SPECS) & set(API_LOADERS) <= {"gitlab"}


def test_each_row_is_a_guess_labelled_with_operations_of_its_api() -> None:
    """A guess names no action (a call would run it directly); each label is an operation (``METHOD url``)
    of the guess's own API, named as that operation is named today."""
    names = {(slug, operation_of(a)): a.qualified_name for slug, actions in _catalogs().items() for a in actions}
    rows = _rows()
    assert len({str(row["guess"]) for row in rows}) == len(rows)
    for row in rows:
        assert set(row) == {"guess", "api", "actions", "operations"}, row
        guess, api = str(row["guess"]), str(row["api"])
        actions, operations = row["actions"], row["operations"]
        assert _index().resolve(guess) is None, guess
        assert isinstance(actions, list) and isinstance(operations, list) and actions, row
        assert len(actions) == len(operations), row
        for name, operation in zip(actions, operations, strict=True):
            assert names.get((api, operation)) == name, (guess, name, operation)


# A floor a few points under what the rules measure on this set (the script prints the figure): it
# catches a regression of the suggestion rules; a change that raises the figure should raise it.
FIRST_RIGHT_FLOOR = 0.87


def test_first_suggestion_floor() -> None:
    share = first_right(_index(), _rows())
    assert share >= FIRST_RIGHT_FLOOR, share
