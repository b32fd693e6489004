"""Discovery: ranked search over the action catalog, forgiving name lookup, suggestions for guessed names.

Design. A hand-written inverted index scored with BM25F (Robertson & Zaragoza 2009; k1 = 1.2). An
action is five weighted fields: its qualified name's words, its summary, the first ~300 characters
of its description, its input parameter names, and its verb (the first word of the last path
segment). Each connector is one *segment* with its own postings, so ``replace_connector`` tokenizes
that connector only; document frequencies are one aggregate map, adjusted by a segment's own counts
when it comes and goes, and idf is computed lazily per query term and cached until the catalog changes.

Everything a posting needs except idf is folded in at build time: a posting is (doc id, saturated
BM25F weight) in two flat ``array`` columns per segment, 8 bytes a posting. Length normalization
uses the segment's own average field lengths, so rebuilding one connector never changes another's
stored weights. A query touches only its own terms' postings: the longest list becomes the score map
in C (``dict(zip(...))``), later lists are added only where they meet it, and the top is cut with
``heapq.nlargest``. Words are normalized the same way on both sides (see ``_text``).

``suggest`` serves the ``action_not_found`` path (SPEC 3.2): models call guessed names like
``github.create_issue``; it answers with the closest real actions.
"""

from __future__ import annotations

from ._index import DiscoveryIndex
from ._text import fold_name

__all__ = ["DiscoveryIndex", "fold_name"]
