"""How well ``discover`` ranks: recall@1/5/10, MRR and latency per ranker, on public and hand-labelled data.

Test sets:

(a) Intents worded as users speak (``tests/data/intents/*.json``): one file per set, each row an
    intent, the action(s) that do it (labelled by reading the spec) and its split, ``dev`` (may be
    looked at while tuning) or ``holdout`` (never), fixed by a seeded hash (``bench_discover_data``).
    The APIs are real descriptions from ``tests/data`` loaded through the gateway's own
    normalizers (OpenAPI, Postman, GraphQL, MCP). Each set is searched over its own APIs, then
    every intent over all of them loaded together (POOLED).
(b) BFCL: the Berkeley Function Calling Leaderboard data shipped by the PyPI package ``bfcl-eval``
    (only its data files are read; ``pip install --no-deps bfcl-eval``). The function documents of
    ``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple`` and ``irrelevance`` are pooled
    into one catalog through the MCP normalizer, deduplicated by (name, description); each question
    of the first four is a query whose relevant documents are its ground-truth functions
    (``irrelevance`` only adds distractors). The ``live_*`` categories are pooled the same way into a
    second catalog. Long questions (over 500 characters) are included. BFCL repeats functions under
    one name with reworded descriptions (live: 1,506 documents, 738 names), so each BFCL table has a
    second pooled row where any document of the right function name counts.

Rankers, side by side: ours lexical (``DiscoveryIndex``); ours hybrid and dense alone (MiniLM, with
the ``embeddings`` extra); BM25 over name + description; BM25 over name + description + parameter
names and descriptions. The BM25 baselines use ``rank-bm25`` (``pip install -e '.[bench]'``),
BM25Okapi with its defaults, over lowercase alphanumeric runs minus English stopwords. With several
relevant documents, recall@k is ``|relevant in top k| / min(k, |relevant|)``; MRR is the reciprocal
rank of the first relevant document within the top 10. Document vectors are embedded before timing
starts (and kept between runs in ``--vector-cache``, by model and text digest); every query is
embedded while timed.

Each table has a ``low %`` column: the share of queries ``discover`` answers with ``confidence: low``
(rankers that have no confidence leave it empty). Every intent is answerable, so it should be small;
then off-topic questions, which none of the APIs answers (``scripts/tuning/off_topic.json``, written for
the confidence floor, and BFCL's ``irrelevance`` questions when ``bfcl-eval`` is installed), are asked
over each set's APIs and over all of them, where it should be large.

Usage: python scripts/bench_discover_quality.py [--sets intents,bfcl,live] [--only stripe,slack] [--misses N]
       [--misses-of 'ours hybrid'] [--split dev] [--splits dev] [--lexical] [--vector-cache FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.discovery import DiscoveryIndex  # noqa: E402
from mcp_gateway.vocabulary.model import Action  # noqa: E402
from scripts.bench_discover_data import DATA, catalog, connectors_of, load_intent_sets, mcp_tools  # noqa: E402

GITHUB_SPEC = DATA / "openapi" / "github" / "api.github.com.json.gz"
INTENTS = REPO / "tests" / "data" / "intents" / "github.json"
BFCL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
BFCL_DISTRACTORS = ("irrelevance",)
LIVE_CATEGORIES = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
LIVE_DISTRACTORS = ("live_irrelevance",)
INSTALL_HINT = (
    "BFCL data not found. Install the package's data files (no dependencies needed):\n"
    "    pip install --no-deps bfcl-eval\n"
    "or point --bfcl-data at the folder holding BFCL_v4_*.json."
)
KS = (1, 5, 10)
OFF_TOPIC = REPO / "scripts" / "tuning" / "off_topic.json"
"""Questions none of the benchmark's APIs answers (weather, recipes, trivia, chat), written by hand."""


@dataclass(frozen=True, slots=True)
class Case:
    """One query and the qualified names that answer it."""

    query: str
    relevant: frozenset[str]
    group: str = ""
    """The BFCL category, or the intent's split (dev / holdout)."""


@dataclass(slots=True)
class Metrics:
    n: int = 0
    recall: dict[int, float] = field(default_factory=dict)
    mrr: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    misses: list[tuple[Case, list[str]]] = field(default_factory=list)
    """Cases whose top 5 holds nothing relevant, with that top 5."""
    low: float | None = None
    """The share of cases answered with ``confidence: low`` (None: the ranker says nothing about it)."""


class Ranked(list[str]):
    """A ranking, and whether ``discover`` would call it unsure: ``low()`` is asked after the timing."""

    def __init__(self, names: Iterable[str], low: Callable[[], bool] | None = None) -> None:
        super().__init__(names)
        self.low = low


RankFn = Callable[..., list[str]]
"""``rank(query, k, view=None)``: the qualified names of the best ``k`` documents, best first; ``view``
limits the search to those connectors (a set searched as if its APIs were the whole catalog)."""


# -- data -------------------------------------------------------------------------------------------


def github_actions() -> list[Action]:
    return list(catalog("github"))


def load_intents(path: Path = INTENTS) -> list[Case]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [Case(row["intent"], frozenset(row["actions"]), row["split"]) for row in rows]


def intent_sets() -> dict[str, list[Case]]:
    """Every labelled set in ``tests/data/intents``: ``{set name: cases}``, each case's group its split."""
    return {
        name: [Case(row["intent"], frozenset(row["actions"]), row["split"]) for row in rows]
        for name, rows in load_intent_sets().items()
    }


def bfcl_data_dir(explicit: str | None = None) -> Path | None:
    """The ``data`` folder of an installed ``bfcl-eval`` (found without importing it: its deps may be absent)."""
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("bfcl_eval")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(location) / "data" / "BFCL_v4_simple_python.json").is_file():
            return Path(location) / "data"
    return None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _bfcl_schema(parameters: Any) -> dict[str, Any]:
    """BFCL writes ``"type": "dict"`` where JSON Schema says ``object``; nothing else needs changing here."""
    schema = dict(parameters) if isinstance(parameters, dict) else {}
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def load_bfcl(
    data: Path, categories: Sequence[str], distractors: Sequence[str] = ()
) -> tuple[list[Action], list[Case]]:
    """One pooled catalog (dedup by name + description) and one case per answered question.

    BFCL's functions are function-calling schemas, the shape of an MCP ``tools/list`` entry: they go
    through the MCP source's normalizer (``sources.mcp``), as an upstream MCP server's tools would.
    Functions that share a name but not a description stay apart: the first goes to connector
    ``bfcl``, the next to ``bfcl-2`` and so on, so each has its own qualified name.
    """
    slots: dict[tuple[str, str], tuple[str, int]] = {}  # (name, description) -> (connector, position)
    taken: dict[str, int] = {}  # name -> how many distinct descriptions so far
    tools: dict[str, list[dict[str, Any]]] = {}

    def add(function: dict[str, Any]) -> tuple[str, int]:
        key = (function["name"], function.get("description") or "")
        if key not in slots:
            taken[key[0]] = taken.get(key[0], 0) + 1
            slug = "bfcl" if taken[key[0]] == 1 else f"bfcl-{taken[key[0]]}"
            listing = tools.setdefault(slug, [])
            tool = {"name": key[0], "description": key[1], "inputSchema": _bfcl_schema(function.get("parameters"))}
            listing.append(tool)
            slots[key] = (slug, len(listing) - 1)
        return slots[key]

    raw: list[tuple[str, str, set[tuple[str, int]]]] = []
    for category in [*categories, *distractors]:
        answers_file = data / "possible_answer" / f"BFCL_v4_{category}.json"
        answers = {row["id"]: row["ground_truth"] for row in _jsonl(answers_file)} if answers_file.is_file() else {}
        for entry in _jsonl(data / f"BFCL_v4_{category}.json"):
            own = {function["name"]: add(function) for function in entry["function"]}
            if category in distractors or entry["id"] not in answers:
                continue
            wanted = {own[name] for call in answers[entry["id"]] for name in call if name in own}
            turn = entry["question"][0]
            query = " ".join(m["content"] for m in turn if m.get("role") == "user")
            if wanted and query.strip():
                raw.append((query, category, wanted))
    actions = {slug: mcp_tools(slug, listing) for slug, listing in tools.items()}
    cases = [
        Case(query, frozenset(actions[slug][position].qualified_name for slug, position in wanted), category)
        for query, category, wanted in raw
    ]
    return [action for group in actions.values() for action in group], cases


# -- rankers ----------------------------------------------------------------------------------------

_WORDS = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself let me more most my
    myself no nor not of off on once only or other ought our ours ourselves out over own same she should
    so some such than that the their theirs them themselves then there these they this those through to
    too under until up very was we were what when where which while who whom why with would you your
    yours yourself yourselves""".split()
)


def plain_tokens(text: str) -> list[str]:
    """The baselines' tokenizer: lowercase alphanumeric runs, English stopwords out, nothing else."""
    return [word for word in _WORDS.findall(text.lower()) if word not in _STOP]


def _params_text(action: Action) -> str:
    properties = action.input_schema.get("properties") if isinstance(action.input_schema, dict) else None
    if not isinstance(properties, dict):
        return ""
    parts: list[str] = []
    for name, schema in properties.items():
        parts.append(str(name))
        if isinstance(schema, dict) and isinstance(schema.get("description"), str):
            parts.append(schema["description"])
    return " ".join(parts)


def _doc_text(action: Action, *, params: bool) -> str:
    text = f"{action.path} {action.summary} {action.description}"
    return f"{text} {_params_text(action)}" if params else text


def _indexed(actions: Sequence[Action], index: DiscoveryIndex) -> DiscoveryIndex:
    by_connector: dict[str, list[Action]] = {}
    for action in actions:
        by_connector.setdefault(action.connector, []).append(action)
    for slug, group in by_connector.items():
        index.replace_connector(slug, group)
    return index


def ours(actions: Sequence[Action]) -> RankFn:
    index = _indexed(actions, DiscoveryIndex())

    def rank(query: str, k: int, view: Collection[str] | None = None) -> list[str]:
        names = [a.qualified_name for a, _ in index.search(query, limit=k, connectors=view)]
        return Ranked(names, lambda: index.find(query, limit=k, connectors=view).confidence == "low")

    return rank


def bm25(actions: Sequence[Action], *, params: bool) -> RankFn:
    from rank_bm25 import BM25Okapi  # benchmark-only: pip install -e '.[bench]'

    docs = [plain_tokens(_doc_text(action, params=params)) or ["_"] for action in actions]
    names = [action.qualified_name for action in actions]
    whole = BM25Okapi(docs)
    by_view: dict[frozenset[str], tuple[Any, list[str]]] = {}

    def model(view: Collection[str] | None) -> tuple[Any, list[str]]:
        # A view is a separate BM25 over just its connectors' actions: idf as that catalog alone would have it.
        if view is None:
            return whole, names
        key = frozenset(view)
        if key not in by_view:
            keep = [i for i, action in enumerate(actions) if action.connector in key]
            by_view[key] = (BM25Okapi([docs[i] for i in keep]), [names[i] for i in keep])
        return by_view[key]

    def rank(query: str, k: int, view: Collection[str] | None = None) -> list[str]:
        tokens = plain_tokens(query)
        if not tokens:
            return []
        bm, keys = model(view)
        scores = bm.get_scores(tokens)
        order = sorted(range(len(keys)), key=lambda i: (-scores[i], keys[i]))
        return [keys[i] for i in order[:k] if scores[i] > 0]

    return rank


DEFAULT_VECTOR_CACHE = Path(tempfile.gettempdir()) / "mcp-gateway-bench-vectors.sqlite3"
VECTOR_CACHE: Path | None = DEFAULT_VECTOR_CACHE
"""Action vectors kept between runs, keyed by model and text digest (``--vector-cache``; empty: none)."""


class DiskVectorStore:
    """A ``VectorStore`` in one SQLite file: benchmark runs on one machine re-embed only changed texts.

    The key is (model label, digest of the embedded text), as in the gateway's own store; it does not
    see a change inside the encoder (say a new token cap), so delete the file after one.
    """

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vector (model TEXT, digest BLOB, blob BLOB, PRIMARY KEY (model, digest))"
        )

    async def get_vectors(self, model: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        for start in range(0, len(digests), 500):
            chunk = list(digests[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT digest, blob FROM vector WHERE model = ? AND digest IN ({marks})", [model, *chunk]
            )
            found.update((bytes(digest), bytes(blob)) for digest, blob in rows)
        return found

    async def put_vectors(self, model: str, vectors: Mapping[bytes, bytes]) -> None:
        rows = [(model, digest, blob) for digest, blob in vectors.items()]
        self._db.executemany("INSERT OR REPLACE INTO vector VALUES (?, ?, ?)", rows)
        self._db.commit()


LEXICAL_ONLY = False
"""``--lexical``: skip the embedding rows (embedding a few thousand actions takes minutes on two cores)."""


def rankers(actions: Sequence[Action]) -> dict[str, RankFn]:
    """Every ranker the table compares, built over the same catalog; BM25 rows need ``rank-bm25``."""
    out: dict[str, RankFn] = {"ours lexical": ours(actions)}
    missing = [name for name in _EMBEDDING_MODULES if importlib.util.find_spec(name) is None]
    if LEXICAL_ONLY:
        pass
    elif missing:
        print(f"{', '.join(missing)} not installed: no hybrid or dense rows ({INSTALL_EMBEDDINGS})", file=sys.stderr)
    else:
        out.update(minilm_rankers(actions))
    if importlib.util.find_spec("rank_bm25") is None:
        print("rank-bm25 is not installed: BM25 rows skipped (pip install -e '.[bench]')", file=sys.stderr)
    else:
        out["BM25 name+desc"] = bm25(actions, params=False)
        out["BM25 +params"] = bm25(actions, params=True)
    return out


_EMBEDDING_MODULES = ("numpy", "tokenizers", "onnxruntime")
INSTALL_EMBEDDINGS = "python3 -m pip install -e '.[embeddings]'"


def embedded_search(actions: Sequence[Action]) -> Any:
    """A ``HybridSearch`` (the bundled model, ``VECTOR_CACHE``) with every action of ``actions`` embedded."""
    import anyio

    from mcp_gateway.discovery.dense import MemoryVectorStore
    from mcp_gateway.discovery.hybrid import HybridSearch
    from mcp_gateway.discovery.providers import local_provider

    provider = local_provider()
    store = DiskVectorStore(VECTOR_CACHE) if VECTOR_CACHE else MemoryVectorStore()
    search = HybridSearch(provider, store)
    by_connector: dict[str, list[Action]] = {}
    for action in actions:
        by_connector.setdefault(action.connector, []).append(action)

    async def embed_all() -> None:
        for slug, group in by_connector.items():
            await search.embedder.refresh(slug, group)

    started, cpu = time.perf_counter(), time.process_time()
    anyio.run(embed_all)
    print(
        f"MiniLM: embedded {len(search.embedder.index):,} actions in {time.perf_counter() - started:.1f} s "
        f"({time.process_time() - cpu:.1f} s CPU)",
        file=sys.stderr,
    )
    return search


def minilm_rankers(actions: Sequence[Action]) -> dict[str, RankFn]:
    """Ours hybrid exactly as ``discover`` ranks (``HybridSearch.rank``: the lexical pool fused with dense
    retrieval over every action), and MiniLM alone (cosine over every action)."""
    import anyio

    from mcp_gateway.discovery import _rank

    search = embedded_search(actions)
    index = _indexed(actions, DiscoveryIndex())
    every = frozenset(action.connector for action in actions)

    def vector(query: str) -> Any:
        return anyio.run(search.embedder.embed_query, query)

    def dense(query: str, k: int, view: Collection[str] | None = None) -> list[str]:
        return [name for name, _ in search.embedder.index.search(vector(query), view, k=k)]

    def hybrid(query: str, k: int, view: Collection[str] | None = None) -> list[str]:
        lexical = index.find(query, limit=max(k, _rank.POOL), connectors=view)
        allowed = every if view is None else every & set(view)
        vector, each = anyio.run(search.query_vectors, index, query)
        found = search.rank(index, lexical, vector, allowed=allowed, limit=k, asks=each)
        unsure = found.confidence == "low"
        return Ranked((a.qualified_name for a, _ in found.hits), lambda: unsure)

    return {"ours hybrid": hybrid, "dense (MiniLM) alone": dense}


# -- measuring --------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def evaluate(
    rank: RankFn,
    cases: Iterable[Case],
    *,
    depth: int = 10,
    view: Collection[str] | None = None,
    key: Callable[[str], str] | None = None,
) -> Metrics:
    """Recall@1/5/10 (capped at the number of relevant documents), MRR@10 and per-query latency.

    ``key`` maps a qualified name to what counts as the same answer (default: itself).
    """
    metrics = Metrics(recall=dict.fromkeys(KS, 0.0))
    latencies: list[float] = []
    reciprocal = 0.0
    unsure: list[bool] = []
    for case in cases:
        started = time.perf_counter()
        top = rank(case.query, depth, view)
        latencies.append((time.perf_counter() - started) * 1000)
        if isinstance(top, Ranked) and top.low is not None:
            unsure.append(top.low())
        relevant = case.relevant if key is None else frozenset(map(key, case.relevant))
        found = top if key is None else list(dict.fromkeys(map(key, top)))
        metrics.n += 1
        for k in KS:
            metrics.recall[k] += len(relevant.intersection(found[:k])) / min(k, len(relevant))
        first = next((i for i, name in enumerate(found) if name in relevant), None)
        reciprocal += 0.0 if first is None else 1.0 / (first + 1)
        if first is None or first >= 5:
            metrics.misses.append((case, top[:5]))
    if metrics.n:
        metrics.recall = {k: v / metrics.n for k, v in metrics.recall.items()}
        metrics.mrr = reciprocal / metrics.n
        metrics.p50_ms = statistics.median(latencies)
        metrics.p99_ms = _percentile(latencies, 0.99)
        metrics.low = sum(unsure) / len(unsure) if len(unsure) == metrics.n else None
    return metrics


def low_rate(rank: RankFn, queries: Sequence[str], view: Collection[str] | None = None) -> float | None:
    """The share of ``queries`` answered with ``confidence: low`` (None: the ranker has no confidence)."""
    unsure: list[bool] = []
    for query in queries:
        top = rank(query, 10, view)
        if not isinstance(top, Ranked) or top.low is None:
            return None
        unsure.append(top.low())
    return sum(unsure) / len(unsure) if unsure else None


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}"


def _row(label: str, m: Metrics) -> str:
    recall = " | ".join(f"{100 * m.recall[k]:.1f}" for k in KS)
    return f"| {label} | {m.n} | {recall} | {m.mrr:.3f} | {_percent(m.low)} | {m.p50_ms:.2f} | {m.p99_ms:.2f} |"


def table(title: str, results: dict[str, dict[str, Metrics]]) -> str:
    """``results[group][ranker]`` as one markdown table."""
    lines = [f"### {title}", "", "| set | ranker | queries | R@1 | R@5 | R@10 | MRR | low % | p50 ms | p99 ms |"]
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for group, by_ranker in results.items():
        lines.extend(_row(f"{group} | {name}", m) for name, m in by_ranker.items())
    return "\n".join(lines)


SAME_NAME = "pooled, any same-name function counts"
"""BFCL repeats a function under one name with reworded descriptions (live: 1,506 documents, 738 names;
``get_current_weather`` 29 times): the strict rows ask for the one document of the question's own
entry, these count any document of the same function name as right."""


def function_name(qualified: str) -> str:
    return qualified.partition(".")[2]


def run_set(
    actions: Sequence[Action], cases: Sequence[Case], groups: Sequence[str], pooled: str
) -> dict[str, dict[str, Metrics]]:
    built = rankers(actions)
    results: dict[str, dict[str, Metrics]] = {pooled: {}, SAME_NAME: {}}
    for name, rank in built.items():
        results[pooled][name] = evaluate(rank, cases)
        results[SAME_NAME][name] = evaluate(rank, cases, key=function_name)
    for group in groups:
        subset = [case for case in cases if case.group == group]
        results[group] = {name: evaluate(rank, subset) for name, rank in built.items()}
    return results


SPLITS = ("dev", "holdout")


def off_topic_questions(bfcl_data: Path | None) -> dict[str, list[str]]:
    """Questions none of the intent sets' APIs answers: ours, and BFCL's ``irrelevance`` when installed."""
    found = {"off-topic (ours)": json.loads(OFF_TOPIC.read_text(encoding="utf-8"))}
    irrelevance = bfcl_data / "BFCL_v4_irrelevance.json" if bfcl_data is not None else None
    if irrelevance is not None and irrelevance.is_file():
        found["BFCL irrelevance"] = [
            " ".join(m["content"] for m in row["question"][0] if m.get("role") == "user") for row in _jsonl(irrelevance)
        ]
    return found


OFF_TOPIC_VIEWS = ("github", "stripe", "slack", "box", "notion", "wise", "petstore", "realworld")
"""The sets whose APIs are asked the off-topic questions: not the MCP servers', whose ``fetch`` (any URL)
and ``time`` do answer some of them, nor BFCL's own catalog."""


def off_topic_table(
    sets: dict[str, list[Case]], built: dict[str, RankFn], every: Sequence[str], questions: dict[str, list[str]]
) -> str:
    """How often each ranker answers the off-topic ``questions`` with ``confidence: low``, over each
    set's APIs (their mean) and over every API but the MCP servers' at once."""
    scored = [name for name, rank in built.items() if low_rate(rank, ["ping"]) is not None]
    pooled = [slug for slug in every if slug not in _MCP_ANSWERS]
    lines = ["| questions | ranker | over | low % |", "|---|---|---|---|"]
    for label, queries in questions.items():
        asked = f"{label} ({len(queries)})"
        for name in scored:
            views = [connectors_of(_rows(sets[s])) for s in OFF_TOPIC_VIEWS if s in sets]
            rates = [rate for view in views if (rate := low_rate(built[name], queries, view)) is not None]
            if rates:
                lines.append(f"| {asked} | {name} | each set's APIs (mean) | {_percent(sum(rates) / len(rates))} |")
            pooled_rate = low_rate(built[name], queries, pooled)
            lines.append(f"| {asked} | {name} | {len(pooled)} APIs | {_percent(pooled_rate)} |")
    return "\n".join(lines)


_MCP_ANSWERS = frozenset({"fetch", "time"})
"""Connectors that do answer some off-topic questions ("fetch the weather page", "what time is it")."""


def run_intents(
    sets: dict[str, list[Case]], splits: Sequence[str] = SPLITS, off_topic: dict[str, list[str]] | None = None
) -> tuple[dict[str, dict[str, Metrics]], str]:
    """Each set searched over its own APIs (``view``), then all intents over every API loaded together;
    only the ``splits`` asked for are ranked (``--splits dev`` while tuning: the holdout is never run).
    With ``off_topic``, also the table of how often those questions come out ``low`` (``off_topic_table``)."""
    every = sorted({slug for cases in sets.values() for slug in connectors_of(_rows(cases))})
    actions = [action for slug in every for action in catalog(slug)]
    built = rankers(actions)
    results: dict[str, dict[str, Metrics]] = {}
    for name, cases in sets.items():
        view = connectors_of(_rows(cases))
        for split in splits:
            subset = [case for case in cases if case.group == split]
            if subset:
                results[f"{name} ({'+'.join(view)}) {split}"] = {
                    ranker: evaluate(rank, subset, view=view) for ranker, rank in built.items()
                }
    pooled = [case for cases in sets.values() for case in cases]
    label = f"POOLED: {len(actions):,} actions of {len(every)} APIs"
    for split in splits:
        subset = [case for case in pooled if case.group == split]
        results[f"{label}, {split}"] = {ranker: _pooled(rank, subset, every) for ranker, rank in built.items()}
    return results, off_topic_table(sets, built, every, off_topic) if off_topic else ""


SURFACES = ({"github", "githubql", "githubmcp"}, {"slack", "slackmcp"}, {"realworld", "conduit"})
"""Connectors that are several surfaces of one service (REST, GraphQL, an MCP server): in the pooled run a
case labelled on one surface does not see the others, whose twin actions would be right answers too."""


def _pooled(rank: RankFn, cases: Sequence[Case], every: Sequence[str]) -> Metrics:
    by_view: dict[tuple[str, ...], list[Case]] = {}
    for case in cases:
        own = {name.split(".", 1)[0] for name in case.relevant}
        hidden = set().union(*(surfaces - own for surfaces in SURFACES if surfaces & own))
        by_view.setdefault(tuple(slug for slug in every if slug not in hidden), []).append(case)
    parts = [evaluate(rank, group, view=view) for view, group in by_view.items()]
    return _merge(parts)


def _merge(parts: Sequence[Metrics]) -> Metrics:
    """One ``Metrics`` for several disjoint runs (latency percentiles from the pooled medians: approximate)."""
    out = Metrics(recall=dict.fromkeys(KS, 0.0))
    out.n = sum(part.n for part in parts)
    if not out.n:
        return out
    for k in KS:
        out.recall[k] = sum(part.recall[k] * part.n for part in parts) / out.n
    out.mrr = sum(part.mrr * part.n for part in parts) / out.n
    if all(part.low is not None for part in parts):
        out.low = sum((part.low or 0.0) * part.n for part in parts) / out.n
    out.p50_ms = statistics.median([part.p50_ms for part in parts for _ in range(part.n)])
    out.p99_ms = max(part.p99_ms for part in parts)
    out.misses = [miss for part in parts for miss in part.misses]
    return out


def _rows(cases: Iterable[Case]) -> list[dict[str, Any]]:
    return [{"actions": sorted(case.relevant)} for case in cases]


def _show_misses(results: dict[str, dict[str, Metrics]], ranker: str, group: str, limit: int) -> None:
    if ranker not in results[group]:
        print(f"  no {ranker!r} row (rankers: {', '.join(results[group])})")
        return
    for case, top in results[group][ranker].misses[:limit]:
        print(f"  MISS {case.query[:90]!r} want {sorted(case.relevant)} got {top}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default="intents,bfcl,live", help="comma-separated: intents, bfcl, live")
    parser.add_argument("--only", help="comma-separated intent set names (default: every tests/data/intents/*.json)")
    parser.add_argument("--bfcl-data", help="folder holding BFCL_v4_*.json (default: the installed bfcl-eval)")
    parser.add_argument("--misses", type=int, default=0, help="print this many top-5 misses of ours per set")
    parser.add_argument("--split", default="dev", help="which split's misses to print (never tune on holdout)")
    parser.add_argument(
        "--splits",
        default=",".join(SPLITS),
        help="comma-separated intent splits to rank; 'dev' while tuning, so the holdout stays unseen",
    )
    parser.add_argument(
        "--misses-of", default="ours lexical", help="whose misses to print: 'ours lexical', 'ours hybrid', ..."
    )
    parser.add_argument("--lexical", action="store_true", help="skip hybrid and dense (no embedding)")
    parser.add_argument("--no-off-topic", action="store_true", help="skip the off-topic questions' table")
    parser.add_argument(
        "--vector-cache",
        default=str(DEFAULT_VECTOR_CACHE),
        help="SQLite file keeping action vectors between runs (model + text digest); '' for none",
    )
    args = parser.parse_args()
    sets = set(args.sets.split(","))
    global LEXICAL_ONLY, VECTOR_CACHE
    LEXICAL_ONLY = args.lexical
    VECTOR_CACHE = Path(args.vector_cache) if args.vector_cache else None

    if "intents" in sets:
        found = intent_sets()
        if args.only:
            found = {name: cases for name, cases in found.items() if name in args.only.split(",")}
        splits = [split for split in args.splits.split(",") if split]
        unknown = sorted(set(splits) - set(SPLITS))
        if unknown:
            sys.exit(f"unknown --splits {', '.join(unknown)}: choose among {', '.join(SPLITS)}")
        questions = off_topic_questions(bfcl_data_dir(args.bfcl_data)) if not args.no_off_topic else None
        results, off_topic = run_intents(found, splits, questions)
        total = sum(len(cases) for cases in found.values())
        print(table(f"Intents worded as users speak: {total} in {len(found)} sets", results), "\n")
        if off_topic:
            print("### Off-topic questions: how often `confidence` is low\n", off_topic, "\n", sep="\n")
        if args.misses:
            for group in results:
                if group.endswith(args.split):
                    print(f"{group}, misses of {args.misses_of}:")
                    _show_misses(results, args.misses_of, group, args.misses)

    if sets & {"bfcl", "live"}:
        data = bfcl_data_dir(args.bfcl_data)
        if data is None or not data.is_dir():
            sys.exit(INSTALL_HINT)
        for key, categories, distractors, title in [
            ("bfcl", BFCL_CATEGORIES, BFCL_DISTRACTORS, "BFCL non-live"),
            ("live", LIVE_CATEGORIES, LIVE_DISTRACTORS, "BFCL live"),
        ]:
            if key not in sets:
                continue
            actions, cases = load_bfcl(data, categories, distractors)
            results = run_set(actions, cases, categories, "pooled")
            long = sum(len(case.query) > 500 for case in cases)
            title = f"{title}: {len(actions):,} documents, {len(cases):,} queries ({long} over 500 chars)"
            print(table(title, results), "\n")
            _show_misses(results, args.misses_of, "pooled", args.misses)


if __name__ == "__main__":
    main()
