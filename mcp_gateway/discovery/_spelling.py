"""Typos in a query, repaired against the catalog's own words.

A word of a query that the catalog does not know ("shedule", "meetng", "custmer") is replaced by the
catalog word one edit away (a letter dropped, added, replaced, or two neighbours swapped), the most
common one when several are. Only words the catalog has never used are touched (or that a single
action uses, when the repair is far commoner: ``DiscoveryIndex.corrected``): a word actions use, in
their name, summary, description or parameters, is never "corrected", and a word with no catalog
word one edit away is left as written (the dense side still reads it).

Candidates are generated, not searched for: every string one edit from the word (about 54 per letter)
is looked up in the catalog's word set, a few hundred set lookups per unknown word, with no index
beyond the set itself. Words under ``MIN_LENGTH`` letters are left alone: one edit from a three-letter
word reaches too many real words to pick one.

Nor is a real English word the catalog happens not to use ("contract", "world", "payroll") turned
into a catalog word one letter away ("contact", "word"): the bundled model's tokenizer lists about
22,000 whole English words (``english_words``), and a word among them is taken as meant.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping

from .models import bundled_minilm_dir

__all__ = ["MAX_LENGTH", "MIN_LENGTH", "correction", "edits", "english_words", "slip_rank"]

MIN_LENGTH = 4
"""Shortest word that is repaired."""

MAX_LENGTH = 30
"""Longest word that is repaired: longer is no word but a token, a hash or a run of one letter, and its
edits alone (~54 per letter) would cost more than the whole search."""

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def edits(word: str) -> set[str]:
    """Every string one edit from ``word``: a letter dropped, two neighbours swapped, a letter replaced or added."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {left + right[1:] for left, right in splits if right}
    out.update(left + right[1] + right[0] + right[2:] for left, right in splits if len(right) > 1)
    out.update(left + letter + right[1:] for left, right in splits if right for letter in _LETTERS)
    out.update(left + letter + right for left, right in splits for letter in _LETTERS)
    out.discard(word)
    return out


def correction(
    word: str,
    vocabulary: frozenset[str],
    frequency: Callable[[str], int],
    *,
    english: Mapping[str, int] | None = None,
    known: bool = False,
) -> str | None:
    """The word ``word`` was most likely meant to be, or None (known, too short, or nothing near).

    ``word`` is lowercase; a word in ``vocabulary`` (the catalog's, and what the ranker reads besides)
    or in ``english`` is never changed. Only likely slips are candidates (``slip_rank``: not a letter
    replaced by one far from it on the keyboard). Catalog words one edit away come first: those that
    keep its first letter (slips rarely hit it), then the keyboard's slips before a vowel written for
    another, then the most ``frequent``, then the closest in length, then alphabetical order, so the
    answer never depends on set order. With none, an English word one edit
    away, the commonest first (``english`` maps a word to its rank): the lexical side gains nothing,
    but the dense side reads "mistake" where it would have read "miistake".
    ``known``: ``word`` is in ``vocabulary`` but may still be a slip (the catalog has it once); its
    neighbours are looked for all the same.
    """
    english = english or {}
    if not MIN_LENGTH <= len(word) <= MAX_LENGTH or not word.isalpha() or (word in vocabulary and not known):
        return None
    if word in english:
        return None
    near = {c for c in edits(word) if len(c) >= MIN_LENGTH - 1}
    found = _slips(word, near & vocabulary)
    if found:
        return min(found, key=lambda c: (c[0] != word[0], found[c], -frequency(c), abs(len(c) - len(word)), c))
    found = _slips(word, near & english.keys())
    if found:
        return min(found, key=lambda c: (c[0] != word[0], found[c], english[c], abs(len(c) - len(word)), c))
    return None


def _slips(word: str, candidates: set[str]) -> dict[str, int]:
    """The candidates ``word`` is a likely slip of, each with its ``slip_rank``."""
    return {c: rank for c in candidates if (rank := slip_rank(word, c)) is not None}


_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_VOWELS = frozenset("aeiouy")
_NEIGHBOURS: dict[str, frozenset[str]] = {
    key: frozenset(
        _ROWS[r][i]
        for r in range(max(0, row - 1), min(len(_ROWS), row + 2))
        for i in range(max(0, col - 1), col + 2)
        if i < len(_ROWS[r]) and _ROWS[r][i] != key
    )
    for row, keys in enumerate(_ROWS)
    for col, key in enumerate(keys)
}
"""Each letter's neighbours on a QWERTY keyboard (the row above and below, offset as keys are, roughly)."""


def slip_rank(written: str, meant: str) -> int | None:
    """How likely ``written`` is a slip of ``meant`` (one edit apart): 0 for a letter left out, typed
    twice or extra, or two letters swapped; 1 for a key's neighbour hit ("taks" is "task" before "take");
    2 for one vowel written for another, as it sounds ("calender", "seperate"); None for a letter replaced
    by one far from it on the keyboard, which is rarely a slip: "tash" is "trash", not "task", and
    "radium" is no slip of "radius"."""
    if len(written) != len(meant):
        return 0
    differ = [i for i, (a, b) in enumerate(zip(written, meant, strict=True)) if a != b]
    if len(differ) != 1:
        return 0  # two neighbours swapped
    at = differ[0]
    if written[at] in _NEIGHBOURS.get(meant[at], frozenset()):
        return 1  # after a swap: "taks" is "task" before it is "take"
    return 2 if {written[at], meant[at]} <= _VOWELS else None


@functools.cache
def english_words() -> dict[str, int]:
    """The whole lowercase words of the bundled model's WordPiece vocabulary, each with its rank there
    (its id: whole words are listed commonest first), empty without the model's files.

    Read from ``tokenizer.json`` as plain JSON: no tokenizer library is needed, so a gateway without
    the ``embeddings`` extra repairs typos just as well.
    """
    folder = bundled_minilm_dir()
    if folder is None:
        return {}
    try:
        vocabulary = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
        words = {
            word: int(rank)
            for word, rank in vocabulary.items()
            if isinstance(word, str) and word.isalpha() and word.islower() and len(word) >= MIN_LENGTH - 1
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    rarest = max(words.values(), default=0)
    return words | {word: rarest + 1 for word in WORKPLACE_WORDS if word not in words}


WORKPLACE_WORDS = frozenset(
    """
    admin admins apis autoscale backend backlog backlogs changelog chargeback chargebacks chatbot checkbox
    checklist checklists codebase config configs coworker coworkers csv dataset datasets deploys dropdown
    emoji emojis frontend hashtag hashtags hotfix hotfixes inbox inboxes invoice invoices json kanban
    livestream livestreams login logins logout offboarding offsite onboarding onsite payslip payslips
    playlist playlists podcasts redeploy refund refunds repo repos resync retweet roadmap roadmaps
    rollback rollout screenshot screenshots sdk sdks signup signups sprints standup standups subscriber
    subtask subtasks timesheet timesheets timestamp timestamps tweak tweaks typo typos unfollow
    unsubscribe url urls username usernames vlog vpn webhook webhooks wifi workflow workflows yaml
    """.split()
)
"""Words of everyday work with software that the tokenizer's whole words miss ("typo", "standup",
"frontend"): taken as meant, not repaired to a catalog word one letter away ("typo" to "type")."""
