from __future__ import annotations

import importlib.util
import random
import sys
from types import ModuleType

import pytest

from mcp_gateway.primitives import string_search
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.primitives.string_search import (
    AUTOMATON_MIN_STRINGS,
    AhoCorasickSearch,
    ScanningSearch,
    Span,
    StringSearch,
    compile_search,
)

# Few letters, so that strings overlap and repeat in the texts; a letter beyond the BMP, a combining
# accent and a lone surrogate, so that positions are counted as Python counts them.
_LETTERS = "ab%=\\u2F\U0001f600\u0301\ud800é"


def _reference(strings: set[str], text: str) -> list[Span]:
    """Every occurrence, overlapping ones joined: worked out character by character."""
    covered = [False] * len(text)
    starts = set()
    for s in strings:
        for at in range(len(text) - len(s) + 1):
            if text.startswith(s, at):
                covered[at : at + len(s)] = [True] * len(s)
                starts.add((at, at + len(s)))
    spans: list[Span] = []
    for start, end in sorted(starts):
        if spans and start < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def _both(strings: set[str]) -> list[StringSearch]:
    return [ScanningSearch(strings), AhoCorasickSearch(strings)]


@pytest.mark.parametrize("seed", range(40))
def test_both_searches_give_the_reference_answer_on_random_texts(seed: int) -> None:
    rng = random.Random(seed)
    word = lambda n: "".join(rng.choice(_LETTERS) for _ in range(n))  # noqa: E731
    # Short strings overlap by chance; long ones run past the automaton's anchor.
    strings = {word(rng.randint(1, 6)) for _ in range(rng.randint(1, 12))}
    strings |= {word(rng.randint(30, 45)) for _ in range(rng.randint(0, 3))}
    for _ in range(20):
        pieces = [word(rng.randint(0, 8)) for _ in range(rng.randint(1, 8))]
        chosen = sorted(strings)
        text = "".join(p + (rng.choice(chosen) if rng.random() < 0.5 else "") for p in pieces)
        expected = _reference(strings, text)
        for search in _both(strings):
            assert search.spans(text) == expected, search
            assert search.occurs(text) is bool(expected)
            assert search.found(text) == {s for s in strings if s in text}


def test_every_encoded_form_of_a_secret_is_found_whole_by_both() -> None:
    secrets = [SecretValue("tok_live/ÄbC+9 x=ü😀"), SecretValue({"username": "ann", "password": "p@ss:wörd-long"})]
    forms = set().union(*(s.redaction_forms() for s in secrets))
    decoy = "%74%6F%6B tok_live/ÄbC+9 x=" + "A" * 40
    for form in sorted(forms):
        text = f"{decoy} [{form}] {decoy}"
        at = text.index(f"[{form}]") + 1
        for search in _both(forms):
            spans = search.spans(text)
            assert any(start <= at and at + len(form) <= end for start, end in spans), (search, form)
            assert spans == _reference(forms, text)


def test_overlapping_occurrences_are_one_span() -> None:
    for search in _both({"abcdef", "defghi", "Bearer abcdef"}):
        assert search.spans("x Bearer abcdefghi y abcdef") == [(2, 18), (21, 27)]
        assert search.spans("abcdefabcdef") == [(0, 6), (6, 12)]  # touching is not overlapping


def test_compile_search_uses_the_automaton_only_for_many_strings() -> None:
    few = {f"secret-{i:04d}" for i in range(AUTOMATON_MIN_STRINGS - 1)}
    assert isinstance(compile_search(few), ScanningSearch)
    assert isinstance(compile_search(few | {"one-more"}), AhoCorasickSearch)
    assert isinstance(compile_search(few | {"one-more"}, automaton=False), ScanningSearch)
    assert compile_search({"", "abcd"}).strings == {"abcd"}  # the empty string would match everywhere


def test_a_search_of_more_strings_reuses_the_automaton_of_fewer() -> None:
    strings = {f"secret-{i:04d}-value" for i in range(2000)}
    first = compile_search(strings)
    assert isinstance(first, AhoCorasickSearch)
    more = compile_search(strings | {"late-secret-1"}, previous=first)
    assert more.base is first and more.strings == strings | {"late-secret-1"}  # type: ignore[attr-defined]
    again = compile_search(more.strings | {"late-secret-2"}, previous=more)
    assert again.base is first  # type: ignore[attr-defined]
    text = "… late-secret-1 secret-0007-value late-secret-2 …"
    assert again.spans(text) == ScanningSearch(again.strings).spans(text) == [(2, 15), (16, 33), (34, 47)]
    # Strings that are no longer all there, or too many added since, make a new automaton.
    assert compile_search(strings - {"secret-0001-value"}, previous=first).base is not first  # type: ignore[attr-defined]
    grown = strings | {f"new-{i}" for i in range(1100)}
    assert compile_search(grown, previous=first).base is not first  # type: ignore[attr-defined]


def _without_library(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh copy of the module, imported where ``import ahocorasick`` fails."""
    monkeypatch.setitem(sys.modules, "ahocorasick", None)  # None in sys.modules: the import raises ImportError
    spec = importlib.util.find_spec(string_search.__name__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scan_is_used_when_the_library_cannot_be_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _without_library(monkeypatch)
    many = {f"secret-{i:04d}" for i in range(AUTOMATON_MIN_STRINGS * 2)}
    assert not module.automaton_available()
    search = module.compile_search(many)
    assert type(search).__name__ == "ScanningSearch"
    assert search.spans("x secret-0042 y") == [(2, 13)]
    with pytest.raises(RuntimeError, match="not installed"):
        module.AhoCorasickSearch(many)
    assert string_search.automaton_available()  # the module everyone else imported is untouched
