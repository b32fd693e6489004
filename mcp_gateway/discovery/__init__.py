"""Discovery: ranked search over the action catalog, forgiving name lookup, suggestions for guessed names.

Design. Two stages. First, a hand-written inverted index scored with BM25F (Robertson & Zaragoza
2009). An action is six weighted fields (``_segment``): its qualified name's words, its summary (or
its description's first sentence), its description head, its parameter names, its parameter
description heads, and its verb. Each connector is one *segment* with its own postings, so
``replace_connector`` tokenizes that connector only; document frequencies are one aggregate map,
adjusted by a segment's own counts when it comes and goes, and idf is computed lazily per query term
and cached until the catalog changes. Second, the best forty hits are re-ordered by a five-feature
linear model (``_rank``) that tells near-twins apart by name coverage and exact wording.

Everything a posting needs except idf is folded in at build time: a posting is (doc id, saturated
BM25F weight) in two flat ``array`` columns per segment, 8 bytes a posting. Length normalization
uses the segment's own average field lengths, so rebuilding one connector never changes another's
stored weights. A query touches only its own terms' postings: the longest list becomes the score map
in C (``dict(zip(...))``), later lists are added only where they meet it, and the top is cut with
``heapq.nlargest``. Words are normalized the same way on both sides (see ``_text``); the query side
adds synonyms, agent nouns ("review" -> "reviewer") and splits run-together words ("rerun").

Weights were tuned on BFCL's non-live categories and the dev split of ``tests/data/intents/github.json``;
``scripts/bench_discover_quality.py`` measures them against BM25 baselines, also on held-out data.

Hybrid (``hybrid.HybridSearch``, on whenever the ``embeddings`` extra is installed): dense retrieval
over every action the caller may see (``dense``: all-MiniLM-L6-v2 tuned on API text, int8 in
onnxruntime, or an OpenAI-compatible endpoint, ``providers``), fused with the lexical ranking by
min-max scaled scores (``hybrid.fuse``). The model embeds two short plain texts per action, a card
and a headline (``_segment.dense_texts``). Without the extra, asking for hybrid discovery raises
``EmbeddingsUnavailable`` naming the install command (``_embedding``).

``suggest`` serves the ``action_not_found`` path: models call guessed names like
``github.create_issue``; it answers with the closest real actions (``_suggest``).
"""

from __future__ import annotations

from ._embedding import EmbeddingsUnavailable
from ._index import LOW_CONFIDENCE_HINT, MAX_QUERY_CHARS, DiscoveryIndex, SearchResult
from ._review_cache import ReviewCache
from ._segment import summary_of
from ._segment_cache import SegmentCache
from ._suggest import guess_as_query
from ._text import fold_name

__all__ = [
    "LOW_CONFIDENCE_HINT",
    "MAX_QUERY_CHARS",
    "DiscoveryIndex",
    "EmbeddingsUnavailable",
    "ReviewCache",
    "SearchResult",
    "SegmentCache",
    "fold_name",
    "guess_as_query",
    "summary_of",
]
