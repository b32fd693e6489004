"""How ``discover`` holds up when the same asks are worded differently: typos, long messages, goals.

From the ``dev`` rows of ``tests/data/intents/*.json`` (never the holdout), each intent is searched
as written and as two synthetic variants, all over the 21 APIs loaded together (the pooled view of
``bench_discover_quality``):

- ``typo``: one or two of its words of four letters or more get one slip each (a letter dropped,
  doubled, swapped with the next, or replaced by a neighbour on the keyboard), seeded by the intent's
  text so every run ranks the same strings;
- ``long``: the intent inside a message of 300-1,000 characters, with context before and after it
  (the project, who asked, what happened last week) whose words name other APIs' things;

plus the hand-written rows of ``tests/data/intents/styles/dev.json``, each marked with its style
(``indirect``: a goal, not an operation; ``bulk``: many things to create at once), all tuning rows.

Usage: python scripts/bench_discover_styles.py [--lexical] [--misses N] [--styles plain,typo,long,indirect,bulk]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import scripts.bench_discover_quality as quality  # noqa: E402
from scripts.bench_discover_data import API_LOADERS, INTENTS_DIR, catalog  # noqa: E402

STYLE_ROWS = INTENTS_DIR / "styles" / "dev.json"

_NEIGHBOURS = {
    "a": "qwsz", "b": "vghn", "c": "xdfv", "d": "serfcx", "e": "wsdr", "f": "drtgvc", "g": "ftyhbv",
    "h": "gyujnb", "i": "ujko", "j": "huikmn", "k": "jiolm", "l": "kop", "m": "njk", "n": "bhjm",
    "o": "iklp", "p": "ol", "q": "wa", "r": "edft", "s": "awedxz", "t": "rfgy", "u": "yhji",
    "v": "cfgb", "w": "qase", "x": "zsdc", "y": "tghu", "z": "asx",
}  # fmt: skip

_BEFORE = (
    "Hi! We're in the middle of moving our team's tooling over to the new setup this quarter, and the "
    "release notes, customer tickets and the billing dashboard all still point at the old places.",
    "Quick context: last week a customer complained that their invoice was wrong and the on-call engineer "
    "spent the night looking at logs, comments and old pull requests before finding the problem.",
    "So I'm preparing the Friday review with Alice and Bob from the platform team; they asked me to sort "
    "out a few loose ends with the repositories, channels and files we share with the agency.",
    "Background: our onboarding checklist has twenty steps (accounts, permissions, the welcome message in "
    "the general channel, the payment card for travel), and half of them are still done by hand.",
    "I've been going through the backlog after the incident on Tuesday, where a deploy went out with a "
    "broken config and a few users saw errors on the checkout page for about an hour.",
)
_AFTER = (
    "Thanks a lot, and let me know if anything is unclear; I'll be in meetings most of the afternoon but "
    "will check messages in between.",
    "No rush on the rest of the cleanup, the documents and labels can wait until next sprint, but this one "
    "is blocking the team.",
    "Afterwards we'll probably also look at the webhooks and the monthly report, but that's for another day.",
    "For the record, the finance folks already signed off on it during yesterday's sync.",
)
_ASK = (
    "Could you {intent}?",
    "What I need now: {intent}.",
    "Please {intent}.",
    "Can you help me {intent}?",
    "{Intent}.",
)


def _rng(text: str, salt: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"{salt}:{text}".encode()).digest()[:8], "big"))


def _slip(word: str, rng: random.Random) -> str:
    """One typing slip, never on the first letter (people rarely get that one wrong)."""
    at = rng.randrange(1, len(word))
    kind = rng.choice(("drop", "double", "swap", "near"))
    if kind == "drop":
        return word[:at] + word[at + 1 :]
    if kind == "double":
        return word[:at] + word[at] + word[at:]
    if kind == "swap" and at < len(word) - 1 and word[at] != word[at + 1]:
        return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    near = _NEIGHBOURS.get(word[at].lower())
    return word[:at] + rng.choice(near) + word[at + 1 :] if near else word[:at] + word[at + 1 :]


def typo(intent: str) -> str:
    """The intent with one slip in one or two of its words of four letters or more."""
    rng = _rng(intent, "typo")
    words = intent.split(" ")
    long_enough = [i for i, word in enumerate(words) if len(word) >= 4 and word.isalpha()]
    if not long_enough:
        return intent
    count = min(len(long_enough), rng.choice((1, 2)))
    for i in rng.sample(long_enough, count):
        words[i] = _slip(words[i], rng)
    return " ".join(words)


def lengthen(intent: str) -> str:
    """The intent as the ask of a 300-1,000 character message, with context around it."""
    rng = _rng(intent, "long")
    ask = rng.choice(_ASK).format(intent=intent, Intent=intent[:1].upper() + intent[1:])
    before = rng.sample(_BEFORE, rng.choice((1, 2)))
    after = rng.sample(_AFTER, rng.choice((0, 1)))
    return " ".join([*before, ask, *after])


def cases_by_style(styles: list[str]) -> dict[str, list[quality.Case]]:
    dev = [case for cases in quality.intent_sets().values() for case in cases if case.group == "dev"]
    out: dict[str, list[quality.Case]] = {}
    if "plain" in styles:
        out["plain"] = dev
    if "typo" in styles:
        out["typo"] = [quality.Case(typo(c.query), c.relevant, "dev") for c in dev if typo(c.query) != c.query]
    if "long" in styles:
        out["long"] = [quality.Case(lengthen(c.query), c.relevant, "dev") for c in dev]
    if STYLE_ROWS.is_file():
        for row in json.loads(STYLE_ROWS.read_text(encoding="utf-8")):
            if row["split"] == "dev" and row["style"] in styles:
                out.setdefault(row["style"], []).append(quality.Case(row["intent"], frozenset(row["actions"]), "dev"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lexical", action="store_true", help="skip hybrid (no embedding)")
    parser.add_argument("--misses", type=int, default=0, help="print this many top-5 misses per style")
    parser.add_argument("--misses-of", default="ours hybrid")
    parser.add_argument("--styles", default="plain,typo,long,indirect,bulk")
    parser.add_argument("--vector-cache", default=str(quality.DEFAULT_VECTOR_CACHE))
    parser.add_argument("--show", action="store_true", help="print the generated variants and exit")
    args = parser.parse_args()
    quality.LEXICAL_ONLY = args.lexical
    quality.VECTOR_CACHE = Path(args.vector_cache) if args.vector_cache else None
    by_style = cases_by_style(args.styles.split(","))
    if args.show:
        for style, cases in by_style.items():
            for case in cases:
                print(f"{style}\t{case.query}")
        return
    every = sorted(API_LOADERS)
    actions = [action for slug in every for action in catalog(slug)]
    built = {name: rank for name, rank in quality.rankers(actions).items() if name.startswith("ours")}
    results = {
        f"{style} ({len(cases)})": {name: quality._pooled(rank, cases, every) for name, rank in built.items()}
        for style, cases in by_style.items()
    }
    print(quality.table(f"Dev intents by style, pooled over {len(actions):,} actions of {len(every)} APIs", results))
    if args.misses:
        for group in results:
            print(f"{group}, misses of {args.misses_of}:")
            quality._show_misses(results, args.misses_of, group, args.misses)


if __name__ == "__main__":
    main()
