"""The hand-written guesses over other catalog APIs (tests/data/intents/guessed/) are guesses, labelled
with real operations of APIs no other set uses; and a floor on how often the first suggestion is right.

The figures come from ``python scripts/bench_heldout.py --sets catalog-guesses``; docs/discovery.md has them.
"""

from __future__ import annotations

import json
from functools import cache

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.vocabulary.model import Action
from scripts.bench_discover_data import API_LOADERS
from scripts.bench_heldout import CATALOG_GUESSES, bundled_catalog, catalog_guess_apis, heldout_apis, operation_of
from tests.support.guesses import first_right


def _rows() -> list[dict[str, object]]:
    return json.loads(CATALOG_GUESSES.read_text(encoding="utf-8"))


@cache
def _catalogs() -> dict[str, tuple[Action, ...]]:
    return {slug: bundled_catalog(slug) for slug in catalog_guess_apis()}


@cache
def _index() -> DiscoveryIndex:
    index = DiscoveryIndex()
    for slug, actions in _catalogs().items():
        index.replace_connector(slug, list(actions))
    return index


def test_the_set_is_large_and_over_apis_no_other_set_uses() -> None:
    """Six of its APIs are in no other set; Notion's catalog entry is the spec the mechanical mangles
    (``bench_guessed_names``) already cover, and no hand-written guess."""
    rows = _rows()
    apis = set(catalog_guess_apis())
    assert len(rows) >= 200
    assert len(apis - set(API_LOADERS) - set(heldout_apis())) >= 6
    assert not apis & set(heldout_apis())


def test_each_row_is_a_guess_labelled_with_operations_of_its_api() -> None:
    """A guess names no action (else a call runs it directly) but one of its labels, since names agents
    guess became the actions' own (``sendgrid.list_senders`` for ``GET /v3/senders``); each label is an
    operation (``METHOD url``) of the guess's own API, named as that operation is named today."""
    names = {(slug, operation_of(a)): a.qualified_name for slug, actions in _catalogs().items() for a in actions}
    rows = _rows()
    assert len({str(row["guess"]) for row in rows}) == len(rows)
    for row in rows:
        assert set(row) == {"guess", "actions", "operations"}, row
        guess = str(row["guess"])
        api = guess.split(".", 1)[0]
        actions, operations = row["actions"], row["operations"]
        named = _index().resolve(guess)
        assert named is None or named.qualified_name in actions, guess
        assert isinstance(actions, list) and isinstance(operations, list) and actions, row
        assert len(actions) == len(operations), row
        for name, operation in zip(actions, operations, strict=True):
            assert names.get((api, operation)) == name, (guess, name, operation)


# A floor a few points under what the rules measure on this set (the script prints the figure): it
# catches a regression of the suggestion rules; a change that raises the figure should raise it.
FIRST_RIGHT_FLOOR = 0.89


def test_first_suggestion_floor() -> None:
    share = first_right(_index(), _rows())
    assert share >= FIRST_RIGHT_FLOOR, share
