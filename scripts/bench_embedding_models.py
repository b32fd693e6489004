"""Compare embedding models and fusion methods for hybrid ``discover``; measure hybrid speed and memory at scale.

Quality (default): for each model variant, dense alone and lexical fused with dense
(``fuse_scores`` at a few betas and ``fuse_rrf``, below), recall@1/5/10 and ms per query, on
the GitHub intents (dev / holdout) and BFCL non-live / live (``pip install --no-deps bfcl-eval``).
Data loading and metrics are ``scripts/bench_discover_quality.py``'s. Also prints each model's
load time, embedding time per 1,000 actions and the process RSS after loading it.

Variants: ``minilm-int8`` (the bundled graph, what the gateway runs), ``minilm-fp32`` (the same graph
unquantized, built by ``scripts/build_minilm_onnx.py --float32``: needs ``onnx``, ``safetensors`` and
the float32 weights, the folder ``scripts/tune_minilm.py`` writes, in ``$MINILM_WEIGHTS``).

Speed (``--speed``): per variant, CPU ms per query embedding (120 short intents, one at a time), action
texts (``dense_text`` of 600 GitHub/Stripe/Slack actions) per CPU second, and the cosine of each vector
to the first variant's.

Scale (``--scale N``, run in a fresh process): N actions (GitHub's catalog repeated under distinct
connectors), vectors embedded for a 1,000-action sample and the rest copied (timing is extrapolated),
then hybrid search latency p50/p99 over the intents, and the RSS of that process.

Usage:
    python scripts/bench_embedding_models.py [--sets github,bfcl,live] [--variants minilm-int8,minilm-fp32]
    python scripts/bench_embedding_models.py --scale 10000
    python scripts/bench_embedding_models.py --speed --variants minilm-fp32,minilm-int8
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "scripts"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import bench_discover_quality as quality  # noqa: E402
import numpy as np  # noqa: E402

from mcp_gateway.discovery import DiscoveryIndex  # noqa: E402
from mcp_gateway.discovery._embedding import MiniLmEncoder, embedded_text  # noqa: E402
from mcp_gateway.discovery.dense import DenseIndex  # noqa: E402
from mcp_gateway.vocabulary.model import Action  # noqa: E402

POOL = 40
"""Lexical hits and dense hits each taken into fusion."""

BETA = 1.5
"""Weight of the cosine beside ``lexical / best lexical`` in ``fuse_scores``."""

RRF_K = 60
"""The usual reciprocal-rank-fusion constant: ``1 / (RRF_K + rank)``."""

Hit = tuple[str, float]
"""(qualified name, score), best first in every list."""


# -- the fusions compared (the gateway's own is ``hybrid.fuse``, min-max scaled) -------------------------


def _connector(name: str) -> str:
    return name.partition(".")[0]


def fuse_scores(
    lexical: Sequence[Hit],
    dense: Sequence[Hit],
    cosines: Mapping[str, float] | None = None,
    *,
    ready: Callable[[str], bool] = lambda _slug: True,
    beta: float = BETA,
    limit: int | None = None,
) -> list[Hit]:
    """``lexical / best lexical + beta * cosine`` over the union of both lists, best first.

    ``cosines`` gives the exact cosine of lexical hits outside the dense top ``k`` (``DenseIndex.scores``);
    a hit with no cosine whose connector is not ``ready`` (vectors not computed yet) gets one imputed
    from its lexical standing (``lexical / best * best cosine``), so a connector still being embedded
    ranks as it would lexically instead of sinking. Missing lexical score counts 0.
    """
    best = max((score for _, score in lexical), default=0.0) or 1.0
    cos: dict[str, float] = dict(cosines or {})
    for name, score in dense:
        cos.setdefault(name, score)
    top_cos = max((score for _, score in dense), default=0.0) or max(cos.values(), default=0.0)
    lexical_score = {name: score / best for name, score in lexical}
    fused: dict[str, float] = {}
    for name in dict.fromkeys([*(n for n, _ in lexical), *(n for n, _ in dense)]):
        lex = lexical_score.get(name, 0.0)
        if name in cos:
            value = cos[name]
        elif not ready(_connector(name)):
            value = lex * top_cos
        else:
            value = 0.0
        fused[name] = lex + beta * value
    ranked = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:limit] if limit is not None else ranked


def fuse_rrf(
    lexical: Sequence[Hit],
    dense: Sequence[Hit],
    *,
    ready: Callable[[str], bool] = lambda _slug: True,
    k: int = RRF_K,
    weight: float = 1.0,
    limit: int | None = None,
) -> list[Hit]:
    """Reciprocal-rank fusion: ``1 / (k + lexical rank) + weight / (k + dense rank)``, best first.

    A lexical hit from a connector that is not ``ready`` counts its lexical rank as its dense rank too.
    """
    fused: dict[str, float] = {}
    for rank, (name, _) in enumerate(lexical, start=1):
        fused[name] = fused.get(name, 0.0) + 1.0 / (k + rank)
        if not ready(_connector(name)):
            fused[name] += weight / (k + rank)
    for rank, (name, _) in enumerate(dense, start=1):
        fused[name] = fused.get(name, 0.0) + weight / (k + rank)
    ranked = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:limit] if limit is not None else ranked


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def float32_dir() -> Path:
    """The unquantized graph (``scripts/build_minilm_onnx.py --float32``) beside the bundled tokenizer."""
    import build_minilm_onnx

    from mcp_gateway.discovery.models import bundled_minilm_dir

    source = bundled_minilm_dir()
    assert source is not None, "the bundled model files are absent"
    weights = os.environ.get("MINILM_WEIGHTS")
    assert weights, "set MINILM_WEIGHTS to the float32 weights' folder (scripts/tune_minilm.py writes it)"
    target = Path(tempfile.mkdtemp(prefix="minilm-fp32-"))
    build = [sys.executable, build_minilm_onnx.__file__, str(target / "model.onnx"), "--float32", "--source", weights]
    subprocess.run(build, check=True)
    for name in ("tokenizer.json", "sentence_bert_config.json"):
        (target / name).write_bytes((source / name).read_bytes())
    return target


VARIANTS: dict[str, Callable[[], MiniLmEncoder]] = {
    "minilm-int8": lambda: MiniLmEncoder(),
    "minilm-fp32": lambda: MiniLmEncoder(float32_dir()),
}


def by_connector(actions: Sequence[Action]) -> dict[str, list[Action]]:
    groups: dict[str, list[Action]] = {}
    for action in actions:
        groups.setdefault(action.connector, []).append(action)
    return groups


def embed_all(encoder: MiniLmEncoder, actions: Sequence[Action]) -> tuple[DenseIndex, float]:
    dense = DenseIndex()
    started = time.perf_counter()
    for slug, group in by_connector(actions).items():
        vectors = encoder.encode([embedded_text(a) for a in group])
        dense.replace_connector(slug, [a.qualified_name for a in group], np.stack(vectors))
    return dense, time.perf_counter() - started


def rankers(encoder: MiniLmEncoder, actions: Sequence[Action], dense: DenseIndex) -> dict[str, quality.RankFn]:
    lexical = DiscoveryIndex()
    for slug, group in by_connector(actions).items():
        lexical.replace_connector(slug, group)

    def lex(query: str) -> list[tuple[str, float]]:
        return [(a.qualified_name, s) for a, s in lexical.search(query, limit=POOL)]

    def hybrid(fuse: Callable[[list[tuple[str, float]], list[tuple[str, float]], Any], list[tuple[str, float]]]):
        def rank(query: str, k: int) -> list[str]:
            hits = lex(query)
            vector = encoder.encode([query])[0]
            nearest = dense.search(vector, None, k=POOL)
            return [name for name, _ in fuse(hits, nearest, vector)[:k]]

        return rank

    def scores(beta: float):
        return lambda hits, nearest, vector: fuse_scores(
            hits, nearest, dense.scores(vector, [n for n, _ in hits]), beta=beta
        )

    return {
        "lexical": lambda q, k: [n for n, _ in lex(q)[:k]],
        "dense": lambda q, k: [n for n, _ in dense.search(encoder.encode([q])[0], None, k=k)],
        "hybrid score b=1.0": hybrid(scores(1.0)),
        "hybrid score b=1.5": hybrid(scores(1.5)),
        "hybrid score b=2.5": hybrid(scores(2.5)),
        "hybrid rrf": hybrid(lambda hits, nearest, _v: fuse_rrf(hits, nearest)),
    }


def load_sets(names: Sequence[str], bfcl_data: str | None) -> dict[str, tuple[list[Action], list[quality.Case]]]:
    sets: dict[str, tuple[list[Action], list[quality.Case]]] = {}
    if "github" in names:
        sets["github"] = (quality.github_actions(), quality.load_intents())
    data = quality.bfcl_data_dir(bfcl_data)
    if data is None and ({"bfcl", "live"} & set(names)):
        print(quality.INSTALL_HINT, file=sys.stderr)
    elif data is not None:
        if "bfcl" in names:
            sets["bfcl"] = quality.load_bfcl(data, quality.BFCL_CATEGORIES, quality.BFCL_DISTRACTORS)
        if "live" in names:
            sets["live"] = quality.load_bfcl(data, quality.LIVE_CATEGORIES, quality.LIVE_DISTRACTORS)
    return sets


def compare(args: argparse.Namespace) -> None:
    sets = load_sets(args.sets.split(","), args.bfcl_data)
    for variant in args.variants.split(","):
        gc.collect()
        before = rss_mb()
        started = time.perf_counter()
        encoder = VARIANTS[variant]()
        loaded = time.perf_counter() - started
        print(f"\n## {variant}: loaded in {loaded:.2f} s, RSS {rss_mb():.0f} MB (+{rss_mb() - before:.0f} MB)")
        print("| set | group | ranker | n | R@1 | R@5 | R@10 | p50 ms | p99 ms |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, (actions, cases) in sets.items():
            dense, seconds = embed_all(encoder, actions)
            print(
                f"<!-- {name}: {len(actions)} actions embedded in {seconds:.1f} s, "
                f"{1000 * seconds / len(actions):.1f} s per 1k -->",
                flush=True,
            )
            groups = ["all"] if name != "github" else ["all", "dev", "holdout"]
            for label, rank in rankers(encoder, actions, dense).items():
                for group in groups:
                    chosen = [c for c in cases if group == "all" or c.group == group]
                    m = quality.evaluate(rank, chosen)
                    print(
                        f"| {name} | {group} | {label} | {m.n} | {100 * m.recall[1]:.1f} | "
                        f"{100 * m.recall[5]:.1f} | {100 * m.recall[10]:.1f} | {m.p50_ms:.1f} | {m.p99_ms:.1f} |",
                        flush=True,
                    )
        del encoder


def scale(n: int) -> None:
    """Hybrid latency and RSS at ``n`` actions (GitHub's catalog repeated under distinct connectors)."""
    base = quality.github_actions()
    cases = quality.load_intents()
    encoder = MiniLmEncoder()
    # Embedding is timed on every 8th action (a fair sample of lengths) and extrapolated; the other
    # rows are those vectors with noise (search cost does not depend on the values).
    sample = base[::8]
    started, cpu = time.perf_counter(), time.thread_time()
    sample_vectors = np.stack(encoder.encode([embedded_text(a) for a in sample]))
    per_1k = (time.perf_counter() - started) * 1000 / len(sample)
    cpu_per_1k = (time.thread_time() - cpu) * 1000 / len(sample)
    rng = np.random.default_rng(0)
    all_vectors = np.resize(sample_vectors, (len(base), sample_vectors.shape[1]))
    all_vectors = all_vectors + rng.normal(0, 0.02, all_vectors.shape).astype(np.float32)
    all_vectors /= np.linalg.norm(all_vectors, axis=1, keepdims=True)
    lexical = DiscoveryIndex()
    dense = DenseIndex()
    copies = -(-n // len(base))
    total = 0
    for copy in range(copies):
        slug = "github" if copy == 0 else f"github{copy}"
        take = min(len(base), n - total)
        group = [a.model_copy(update={"connector": slug}) for a in base[:take]]
        lexical.replace_connector(slug, group)
        dense.replace_connector(slug, [a.qualified_name for a in group], all_vectors[:take])
        total += take
    lex_ms: list[float] = []
    hybrid_ms: list[float] = []
    lex_cpu: list[float] = []
    hybrid_cpu: list[float] = []
    for case in cases * 2:
        t0, c0 = time.perf_counter(), time.thread_time()
        hits = [(a.qualified_name, s) for a, s in lexical.search(case.query, limit=POOL)]
        t1, c1 = time.perf_counter(), time.thread_time()
        vector = encoder.encode([case.query])[0]
        nearest = dense.search(vector, None, k=POOL)
        fuse_scores(hits, nearest, dense.scores(vector, [name for name, _ in hits]), limit=10)
        t2, c2 = time.perf_counter(), time.thread_time()
        lex_ms.append((t1 - t0) * 1000)
        hybrid_ms.append((t2 - t0) * 1000)
        lex_cpu.append((c1 - c0) * 1000)
        hybrid_cpu.append((c2 - c0) * 1000)
    q = quality._percentile
    minutes = per_1k * total / 1000 / 60
    print(f"actions: {total:,}; embedding: {per_1k:.1f} s per 1k actions -> {minutes:.1f} min for all")
    print(
        f"embedding CPU time (what an idle core would take): {cpu_per_1k:.1f} s per 1k actions "
        f"-> {cpu_per_1k * total / 1000 / 60:.1f} min for all"
    )
    print(
        f"lexical p50 {statistics.median(lex_ms):.2f} ms p99 {q(lex_ms, 0.99):.2f} ms "
        f"(CPU p50 {statistics.median(lex_cpu):.2f} p99 {q(lex_cpu, 0.99):.2f})"
    )
    print(
        f"hybrid  p50 {statistics.median(hybrid_ms):.2f} ms p99 {q(hybrid_ms, 0.99):.2f} ms "
        f"(CPU p50 {statistics.median(hybrid_cpu):.2f} p99 {q(hybrid_cpu, 0.99):.2f})"
    )
    print(f"RSS with the model, {total:,} vectors and the lexical index: {rss_mb():.0f} MB")


def speed(variants: Sequence[str]) -> None:
    """Per variant: CPU ms per query embedding, action texts per CPU second, cosine to the first variant."""
    import bench_discover

    from mcp_gateway.discovery._segment import dense_text

    bases, _ = bench_discover.base_catalogs()
    actions = [action for group in bases.values() for action in group]
    texts = [dense_text(actions[i]) for i in np.random.default_rng(0).choice(len(actions), 600, replace=False)]
    queries = bench_discover.queries()[:120]
    first: tuple[Any, Any] | None = None
    print("| variant | query CPU ms | action texts per CPU s | cosine to the first: queries min / mean | actions |")
    print("|---|---|---|---|---|")
    for variant in variants:
        encoder = VARIANTS[variant]()
        encoder.encode_matrix(texts[:20])
        cpu = time.thread_time()
        q = np.stack([encoder.encode_matrix([query])[0] for query in queries])
        query_ms = (time.thread_time() - cpu) * 1000 / len(queries)
        cpu = time.thread_time()
        d = encoder.encode_matrix(texts)
        rate = len(texts) / (time.thread_time() - cpu)
        first = first or (q, d)
        cq, cd = np.sum(q * first[0], axis=1), np.sum(d * first[1], axis=1)
        print(
            f"| {variant} | {query_ms:.2f} | {rate:.0f} | {cq.min():.4f} / {cq.mean():.4f} "
            f"| {cd.min():.4f} / {cd.mean():.4f} |",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="github,bfcl,live")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--bfcl-data")
    parser.add_argument("--scale", type=int)
    parser.add_argument("--speed", action="store_true", help="query CPU, batch throughput, cosine between variants")
    args = parser.parse_args()
    if args.scale:
        scale(args.scale)
    elif args.speed:
        speed(args.variants.split(","))
    else:
        compare(args)


if __name__ == "__main__":
    main()
