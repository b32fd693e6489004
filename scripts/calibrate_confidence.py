"""Sweep hybrid ``discover``'s confidence floor over dev answerable intents and off-topic questions.

Hybrid ``discover`` is sure when the best cosine among its first three hits plus ``MEAN_WEIGHT`` times
the query's mean cosine over the searched catalog reaches ``SURE_FLOOR`` (``discovery/hybrid.py``). This
ranks every query once as the gateway does, records the two cosines of its decision, and prints, for a
sweep of floors, the share of each group that would come out ``low``:

- answerable, dev rows only: the held-out set's (``tests/data/intents/heldout``, 8 APIs no tuning used,
  pooled) and the tuned sets' (``tests/data/intents/*.json``, each over its own APIs) as written, with
  typing slips and inside a long message (``bench_discover_styles``);
- off-topic: the held-out set's dev off-topic rows, ``scripts/tuning/off_topic.json`` and BFCL's
  ``irrelevance`` questions (when ``bfcl-eval`` is installed), the dev half of each, over each tuned
  set's APIs and over all of them but the MCP servers ``fetch`` and ``time`` (which answer some).

The floor is then chosen by a rule over these figures (docs/benchmarks.md#confidence-floor); the
holdout rows are never ranked here.

Usage: python scripts/calibrate_confidence.py [--floors 0.44,0.45,...] [--vector-cache FILE]
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections import defaultdict
from collections.abc import Collection, Sequence
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import scripts.bench_discover_quality as quality  # noqa: E402
from mcp_gateway.discovery import hybrid  # noqa: E402
from mcp_gateway.discovery._index import DiscoveryIndex  # noqa: E402
from mcp_gateway.vocabulary.model import Action  # noqa: E402
from scripts.bench_discover_data import catalog, connectors_of, load_intent_sets, split_of  # noqa: E402
from scripts.bench_discover_styles import lengthen, typo  # noqa: E402
from scripts.bench_heldout import load_heldout  # noqa: E402

FLOORS = (0.44, 0.45, 0.455, 0.46, 0.465, 0.47, 0.475, 0.48, 0.49, 0.5)

Decision = tuple[float, float]
"""(best cosine among the first three hits, mean cosine over the searched catalog)."""


class Recorder:
    """Ranks queries through ``HybridSearch.find`` and keeps the cosines each confidence decision read."""

    def __init__(self, actions: Sequence[Action]) -> None:
        self.index = quality._indexed(actions, DiscoveryIndex())
        self.search = quality.embedded_search(actions)
        self.groups: dict[str, list[Decision]] = defaultdict(list)

    def ask(self, group: str, query: str, view: Collection[str] | None = None) -> None:
        seen: list[Decision] = []
        original = hybrid.sure

        def record(best: float, mean: float) -> bool:
            seen.append((best, mean))
            return original(best, mean)

        hybrid.sure = record
        try:
            anyio.run(functools.partial(self.search.find, self.index, query, limit=10, connectors=view))
        finally:
            hybrid.sure = original
        if seen:  # none when no connector has vectors: the answer was lexical
            self.groups[group].append(seen[-1])


def heldout_groups() -> dict[str, list[Decision]]:
    intents, catalogs = load_heldout()
    recorder = Recorder([action for actions in catalogs.values() for action in actions])
    for intent in intents:
        if intent.split == "dev":
            recorder.ask("held-out answerable" if intent.relevant else "held-out off-topic", intent.query)
    return recorder.groups


def tuned_groups() -> dict[str, list[Decision]]:
    sets = load_intent_sets()
    every = sorted({slug for rows in sets.values() for slug in connectors_of(rows)})
    recorder = Recorder([action for slug in every for action in catalog(slug)])
    for rows in sets.values():
        view = connectors_of(rows)
        for row in rows:
            if row["split"] == "dev":
                recorder.ask("dev as written", row["intent"], view)
                recorder.ask("dev with typos", typo(row["intent"]), view)
                recorder.ask("dev in a long message", lengthen(row["intent"]), view)
    pooled = [slug for slug in every if slug not in ("fetch", "time")]
    for label, questions in quality.off_topic_questions(quality.bfcl_data_dir(None)).items():
        dev = [question for question in questions if split_of(question) == "dev"]
        for name in quality.OFF_TOPIC_VIEWS:
            for question in dev:
                recorder.ask(f"{label}, each set's APIs", question, connectors_of(sets[name]))
        for question in dev:
            recorder.ask(f"{label}, {len(pooled)} APIs", question, pooled)
    return recorder.groups


def table(groups: dict[str, list[Decision]], floors: Sequence[float]) -> str:
    lines = ["| group | n | " + " | ".join(f"{floor:g}" for floor in floors) + " |"]
    lines.append("|---|---|" + "---|" * len(floors))
    for group, decisions in groups.items():
        scores = [best + hybrid.MEAN_WEIGHT * mean for best, mean in decisions]
        shares = [100 * sum(score < floor for score in scores) / len(scores) for floor in floors]
        lines.append(f"| {group} | {len(scores)} | " + " | ".join(f"{share:.1f}" for share in shares) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floors", default=",".join(map(str, FLOORS)))
    parser.add_argument("--vector-cache", default=str(quality.DEFAULT_VECTOR_CACHE), help="'' for none")
    args = parser.parse_args()
    quality.VECTOR_CACHE = Path(args.vector_cache) if args.vector_cache else None
    floors = [float(floor) for floor in args.floors.split(",")]
    groups = {**heldout_groups(), **tuned_groups()}
    print(f"Share low (%) by floor; shipped: {hybrid.SURE_FLOOR}, MEAN_WEIGHT {hybrid.MEAN_WEIGHT}\n")
    print(table(groups, floors))


if __name__ == "__main__":
    main()
