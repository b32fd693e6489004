"""What a message asks for and what it does not: its request sentence among the context, the kind of
operation its opening verb asks for, the verbs it declines, its quoted names, and whether it wants many
things.

An agent often forwards a whole message: who asked, what happened last week, and somewhere in it the
request ("Could you archive the old channel?"). The context names things too (customers, invoices,
pull requests), and weighed like the request they pull other actions up. ``asks`` finds the
sentences that make a request, by how requests are worded in English: an imperative verb first
("Create…", "Please add…"), a request phrase ("can you", "I need to", "help me"), or a question. The
ranker weighs those sentences' words fully and the rest less; with no such sentence, or a message of
one sentence, nothing changes.

``without_declined`` takes out what a message says *not* to do ("hide it but don't delete it", "close
it without merging"): those verbs name another operation, the one to avoid, and must not pull it up.

``asked_kind`` reads the everyday verb that opens a request as the kind of operation it asks for ("log
three hours" creates, "mark it done" updates), which as a noun elsewhere ("the audit log") it does not.

``quoted`` marks the words a message quotes ('rename "Draft v3" to "Final proposal"'): names and
values, not what to do ("Draft" is no request for a draft).

``wants_many`` tells a request for many things at once ("add these five people: …", "create 20
users", a list of items) from a request for one, so that a bulk or batch operation, where the
catalog has one, can come first.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = [
    "LONG_MESSAGE",
    "MANY_WORDS",
    "MAX_ASKS",
    "asked_kind",
    "asks",
    "opening_word",
    "quoted",
    "quoted_spans",
    "sentences",
    "several_asks",
    "wants_many",
    "without_declined",
]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*")
_WORDS = re.compile(r"[a-z']+|[0-9]+")

_COUNTING_OFF = "first firstly second secondly third thirdly next then also additionally lastly finally".split()
"""Words that open the next of a message's asks ("First, …", "Then …", "Also, …")."""

_FILLER = frozenset(
    "please pls kindly so ok okay now and but just hi hey hello again quickly oh well alright right yes step".split()
) | frozenset(_COUNTING_OFF)
"""Words that may come before a request's verb ("So please create…", "Now, list…", "Then add…", "First step:
check…"); a number may too ("Step 2: create…")."""

_REQUEST_VERBS = frozenset(
    """add append apply approve archive assign attach ban block book bookmark buy calculate cancel capture
    change charge check clear close comment compare compute confirm connect convert copy count create
    delete describe disable dismiss download draft edit email enable end estimate export fetch file fill
    find fix follow fork generate get give grant hide import invite issue join kick label leave list load
    lock log look lookup make mark merge message move mute notify open order pay pin play post print
    publish pull push put react read record refund register reject release remind remove rename reopen
    reply request reserve reset resolve restore retrieve revoke run save schedule search see select send
    set share show sign snooze star start stop submit subscribe suggest summarize switch sync tag tell
    track transfer translate trigger turn unarchive unassign unblock unfollow unlock unmute unpin
    unstar unsubscribe update upload verify view void watch write""".split()
)
"""English verbs that open an imperative request to a tool ("archive the channel", "refund it")."""

_REQUEST_PHRASES = re.compile(
    r"\b(?:can|could|would|will) (?:you|we|i)\b|\b(?:i|we)(?:'d| would) (?:like|rather|prefer)\b"
    r"|\b(?:i|we) (?:need|want|have) to\b|\b(?:i|we) need\b|\bhelp (?:me|us)\b"
    r"|\bhow (?:do|can|should) (?:i|we)\b|\bis there a way\b|\bwhat i need\b|\bplease\b|\bi'm looking for\b|\blet's\b",
)

MANY_WORDS = ("bulk", "batch", "multiple", "many")
"""Words of the operations that act on many things at once, across APIs ("Bulk add team members",
"batch API", "Create multiple new entities", "Read multiple files")."""

_MANY_CUES = re.compile(
    r"\b(?:several|multiple|bulk|batch|in one go|at once|in one request|in one call|in a single request"
    r"|all of these|each of these|a (?:list|bunch|batch|set) of)\b"
)
"""Words that ask for many things at once, whatever the verb ("read these files at once")."""
_COUNTED = re.compile(
    r"\b(?:(?<!how )many|two|three|four|five|six|seven|eight|nine|ten|twenty|fifty|hundred|dozens?"
    r"|hundreds|thousands|\d{1,5})\s+(?:new\s+|more\s+|other\s+|different\s+)?([a-z]{3,}s)\b"
)
"""A count of things ("these five people", "20 users"): the things are its last word, a plural."""
_UNITS = frozenset(
    """seconds minutes hours days weeks months years times miles kilometres kilometers metres meters feet
    inches pounds dollars euros cents percent degrees kilograms grams items""".split()
)
"""Plurals a count measures rather than lists ("2 hours", "100 dollars"): no bulk operation makes those."""
_WRITES = frozenset(
    """add create make invite register upload import insert send post delete remove archive update tag label
    assign move copy share publish enroll subscribe record save write put set give grant remember store
    fill enter""".split()
)
"""Verbs of a request that makes or changes things: a count or a list with one asks for a bulk write."""
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S", re.MULTILINE)
_ITEM_SEPARATOR = re.compile(r",\s*(?:and\s+|or\s+)?|\s+and\s+")
_ITEM_WORDS = 4
_NOT_ITEM = frozenset("but so then which that who because while if when".split())
"""A phrase opening with these words continues a sentence; it is not an item of a list."""
_CLAUSE = re.compile(r"[:;!?\n]|\.(?:\s|$)")


_ASKS_KEPT = 64
"""Long messages whose request sentences are remembered: the same message is read several times in a row."""

LONG_MESSAGE = 200
"""Characters from which a message's context is told from its request. A shorter one ("What's the weather
in Paris? Use Celsius.") says nothing idle: every sentence of it narrows the request (BFCL's live
questions lost 1.6 points of R@5 when their second sentence weighed half)."""


_IMPERATIVE_KINDS: dict[str, str] = {
    **dict.fromkeys("log record file book schedule register submit write upload invite buy order".split(), "create"),
    **dict.fromkeys("move mark assign reassign rename close reopen resolve reschedule".split(), "update"),
    **dict.fromkeys("download export check count".split(), "read"),
}
"""Everyday verbs that open a request and say what kind of operation it is ("log work", "file a bug",
"book a room"), though as nouns ("the audit log", "a file") they say nothing: only a request's first
word is read this way."""


_OPENING_CHARS = 64
"""Characters read for a request's opening verb: past some filler words ("Ok so please…"), no further."""


def asked_kind(message: str) -> str | None:
    """The kind of operation (create, update, read) a request's opening verb asks for, when it is one of
    ``_IMPERATIVE_KINDS`` ("log three hours on PAY-12" creates), else None."""
    word = opening_word(message)
    return _IMPERATIVE_KINDS.get(word) if word else None


def opening_word(message: str) -> str | None:
    """A request's first word past its filler ("Ok so please…"), lowercase: where its verb would be."""
    words = _past_filler(_WORDS.findall(message[:_OPENING_CHARS].lower()))
    return words[0] if words else None


def _past_filler(words: list[str]) -> list[str]:
    """``words`` from the first that is neither ``_FILLER`` nor a number: where a request's verb would be."""
    start = 0
    while start < len(words) and (words[start] in _FILLER or words[start].isdigit()):
        start += 1
    return words[start:]


def sentences(message: str) -> list[str]:
    """The message's sentences (and lines), blanks dropped."""
    return [part.strip() for part in _SENTENCE.split(message) if part.strip()]


def _request_score(sentence: str) -> int:
    lowered = sentence.lower()
    words = _past_filler(_WORDS.findall(lowered))
    if words and words[0] in _REQUEST_VERBS:
        return 2
    if _REQUEST_PHRASES.search(lowered):
        return 2
    return 1 if sentence.rstrip().endswith("?") else 0


_ONLY_ASKING = (
    frozenset(
        """can could would will you please pls kindly help assist me us with a an the few couple some several
    following these those this that them it things thing tasks task questions question problems problem
    stuff something out of i we me my our need want like to do for on and or as well two three four""".split()
    )
    | _FILLER
)
"""Words of a sentence that only asks for help ("Can you help me with a few things?", "Could you assist
me with these?"): it says nothing about what is wanted."""


def _asks_for_something(sentence: str) -> bool:
    """Whether a sentence says what it asks for, beyond asking for help."""
    return any(word not in _ONLY_ASKING for word in _WORDS.findall(sentence.lower()))


def asks(message: str) -> tuple[str, ...] | None:
    """The sentences of a long message (``LONG_MESSAGE``) that make its request (the best-scored ones),
    or None when it is short, one sentence, or none of its sentences reads as a request."""
    if len(message) < LONG_MESSAGE:
        return None
    return _asks(message)


@functools.lru_cache(maxsize=_ASKS_KEPT)
def _asks(message: str) -> tuple[str, ...] | None:
    # One discover reads a long message's request three times (products it names, its terms, its vector).
    parts = sentences(message)
    if len(parts) < 2:
        return None
    scores = [_request_score(part) if _asks_for_something(part) else 0 for part in parts]
    best = max(scores)
    if best == 0:
        return None
    return tuple(part for part, score in zip(parts, scores, strict=True) if score == best)


MAX_ASKS = 4
"""Asks of one message read each on its own (``several_asks``); later ones ride on the whole message's ranking."""

_NEXT_ASK = re.compile(
    r",?\s+(?:and then|and also|then|also|after that|additionally|plus)\s+|;\s*|,?\s+and\s+(?=(?:"
    + "|".join(sorted(_REQUEST_VERBS))
    + r")\b)",
    re.IGNORECASE,
)
"""Where a sentence goes on to another ask: "…, then archive it", "…; also add…", "… and send…" (an "and"
only before a request verb: "the median and the variance" is one ask)."""

_ENUMERATION = re.compile(
    r"(?:^|[.!?;,:]\s*|\band\s+)(?:" + "|".join([*_COUNTING_OFF, "after that", "plus"]) + r")\b", re.IGNORECASE
)
"""A clause opening with a word that counts asks off ("First, …", "Also, …", "…, then …"): without one, the
sentences that read as requests are one request said twice ("I need the history. I need the raw entries")."""


def several_asks(message: str) -> tuple[str, ...] | None:
    """The asks of a message that counts off several ("Find the invoice. Then email it to the customer.",
    "create the issue and also assign it to me"), in order and at most ``MAX_ASKS``; None for a message of
    one ask, or one that does not count its asks off."""
    if not _ENUMERATION.search(message):
        return None
    found = [
        clause.strip()
        for sentence in sentences(message)
        for clause in _NEXT_ASK.split(sentence)
        if clause.strip() and _request_score(clause) > 0 and _asks_for_something(clause)
    ]
    return tuple(found[:MAX_ASKS]) if len(found) >= 2 else None


_TOKEN = re.compile(r"[A-Za-z]+|[0-9]+")
"""Words as the index reads them ("don't" is "don" and "t")."""
_DO_NOT = (("don", "t"), ("dont",), ("do", "not"), ("doesn", "t"), ("does", "not"), ("never",))
"""A verb after these is not to be done ("don't delete it", "never send")."""
_NOT_DOING = (("without",),)
"""An "-ing" verb after these is not to be done ("without merging"). Not "instead of" nor "rather than":
what they decline is more often a manner of doing the same ("rather than adding them one at a time")."""
_DECLINING = re.compile(
    r"\b(?:" + "|".join(r"\W+".join(cue) for cue in (*_DO_NOT, *_NOT_DOING)) + r")\b", re.IGNORECASE
)
"""Any cue of ``_DO_NOT`` or ``_NOT_DOING``: most messages have none, and are not split into words."""
_WILLING = (("want", "to"), ("need", "to"), ("have", "to"))
"""Words between a negation and its verb ("don't want to lose it")."""
_NOT_A_VERB = frozenset("want need have be get forget miss disturb track reply call contact".split())
"""Words after "do not" that are no operation to avoid: the verbs of ``_WILLING`` and of being, idioms
that ask for the opposite ("don't forget" is remind me), and the names of lists and modes ("do not
disturb", "do not track", "do-not-reply", "do not call")."""


_QUOTED = re.compile(r'"[^"\n]{1,80}"|“[^”\n]{1,80}”|(?<![A-Za-z0-9])\'[^\'\n]{1,80}\'(?![A-Za-z0-9])')
"""A quoted name or value: in straight or curly double quotes, or single quotes that are no apostrophes."""


def quoted(message: str) -> frozenset[int]:
    """The positions of the words of ``message`` (as ``prose_words`` splits it) that are inside quotes
    (``quoted_spans``)."""
    spans = quoted_spans(message)
    if not spans:
        return frozenset()
    return frozenset(
        position
        for position, token in enumerate(_TOKEN.finditer(message))
        if any(start <= token.start() < end for start, end in spans)
    )


def quoted_spans(message: str) -> list[tuple[int, int]]:
    """Where ``message`` quotes a name or value, as ``(start, end)`` offsets. None when the quotes hold
    every word: a quoted request ('"list open issues"') is the request."""
    spans = [match.span() for match in _QUOTED.finditer(message)]
    if spans and all(any(start <= token.start() < end for start, end in spans) for token in _TOKEN.finditer(message)):
        return []
    return spans


def without_declined(message: str) -> str:
    """``message`` without the verbs it says not to do: the word after "don't", "do not" or "never" (past
    "want to", "need to"), and an "-ing" word after "without". A goal
    stated with "can't" or "no longer" ("make sure he can't host meetings") is what is wanted, and is
    left alone."""
    if not _DECLINING.search(message):
        return message
    tokens = list(_TOKEN.finditer(message))
    words = [token.group().lower() for token in tokens]
    out: set[int] = set()
    for start in range(len(words)):
        for cue in _DO_NOT:
            end = _after(words, start, cue)
            if end is not None:
                for willing in _WILLING:
                    end = _after(words, end, willing) or end
                if end < len(words) and words[end] not in _NOT_A_VERB:
                    out.add(end)
        for cue in _NOT_DOING:
            end = _after(words, start, cue)
            if end is not None and end < len(words) and words[end].endswith("ing") and len(words[end]) > 5:
                out.add(end)
    if not out:
        return message
    kept, last = [], 0
    for position in sorted(out):
        kept.append(message[last : tokens[position].start()])
        last = tokens[position].end()
    return "".join([*kept, message[last:]])


def _after(words: Sequence[str], start: int, cue: tuple[str, ...]) -> int | None:
    """The position after ``cue`` when ``words`` has it at ``start``, else None."""
    return start + len(cue) if tuple(words[start : start + len(cue)]) == cue else None


def wants_many(message: str) -> bool:
    """Whether the request is for many things at once: words that say so ("several", "at once", "in
    bulk"), or, with a verb that makes or changes things, a count ("these five people", "20 users"), a
    list of three short items or more, or three list lines."""
    lowered = message.lower()
    if _MANY_CUES.search(lowered):
        return True
    if _WRITES.isdisjoint(_WORDS.findall(lowered)):
        return False  # a list of fields to read, a count of results: not many things to make
    if any(match.group(1) not in _UNITS for match in _COUNTED.finditer(lowered)):
        return True
    if len(_LIST_LINE.findall(message)) >= 3:
        return True
    # "alice, bob and carol", "README, setup.py, LICENSE": three short items or more in a row in one
    # clause (a sentence with commas between its phrases is not a list).
    return any(_listed(part) >= 3 for part in _CLAUSE.split(lowered))


def _listed(clause: str) -> int:
    """The longest run of short items (``_ITEM_WORDS`` words at most) separated by commas or "and"."""
    best = run = 0
    for item in _ITEM_SEPARATOR.split(clause):
        words = item.split()
        run = run + 1 if 0 < len(words) <= _ITEM_WORDS and words[0] not in _NOT_ITEM else 0
        best = max(best, run)
    return best
