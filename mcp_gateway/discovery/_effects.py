"""What an operation achieves, in everyday words, beside what it is named.

Users ask for outcomes ("make sure the intern can no longer see payroll", "keep this message at the
top"); APIs name mechanisms (``remove_collaborator``, ``pins.add``). ``effect_words`` reads an
action's mechanism from what every source kind has, its name's words, its summary, its input
parameters (names and the values of their enums: ``state: open | closed`` is how an issue is
closed, ``visibility: public | private`` how a repository is made private) and the field names of
its response (``remaining`` is what is *left*), and adds the everyday words of the outcome: the
ranker indexes them as a light field of their own (``_segment.FIELDS``), so an action's own name
and summary still weigh most.

The table speaks of mechanisms many APIs share (removing someone, pinning, blocking, archiving,
muting, scheduling, refunding, forwarding, delegating, revisions, workflow transitions), never of one
API's operation names. Some outcomes need a verb and what it acts on together: deleting an event
calls it off, updating a feature flag turns a feature on or off (``_PAIRED``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..vocabulary.model import Action

__all__ = ["EFFECTS", "OUTCOMES", "RETURNED", "effect_phrases", "effect_words", "enum_words", "kind_words"]

_TAKEN = "no longer there, taken out, not anymore"
_LET_IN = "let someone in, give access, work together"
_BLOCKED = "stop them for good, never again, keep spam out"
_QUIET = "stop notifications for a while, do not disturb, quiet"
_KEPT = "remember it for later, mark as important"
_NOTIFIED = "get notified of updates, keep track"
_UNDONE = "undo it, go back, recover"
_MANY = "several at once, in one go"
_ON_MY_BEHALF = "let someone act for me, on my behalf"
_PASSED_ON = "send a copy on to another address automatically"
_FREE = "when people are free or busy, available, double booked"
_NEW_KEY = "replace the key with a new one"
_RAW_EFFECTS: dict[str, str] = {
    # Taking something, or someone's access, away ("delete" and "remove" say it themselves, and most
    # catalogs have hundreds of them: their cards stay as they were).
    "kick": _TAKEN,
    "revoke": _TAKEN,
    "leave": _TAKEN,
    "unassign": "no longer responsible",
    "trash": "throw it away, get rid of it, can be recovered",
    "untrash": "put it back from the bin, recover what was thrown away",
    "purge": "delete everything, clear it out",
    "suspend": "can no longer log in or use it, paused",
    "deactivate": "turn it off, can no longer use it",
    "disable": "turn it off, switch off",
    "expire": "stop working after a date",
    # Letting someone in (adding or removing an access noun: ``_ACCESS``), or act for someone.
    "invite": _LET_IN,
    "grant": _LET_IN,
    "delegate": _ON_MY_BEHALF,
    "assistant": _ON_MY_BEHALF,
    "moderator": "help keep order, remove spam and abuse",
    "enable": "turn it on, switch on",
    "activate": "turn it on, switch on, make it live",
    # Keeping something from happening.
    "block": _BLOCKED,
    "blocklist": _BLOCKED,
    "denylist": _BLOCKED,
    "ban": _BLOCKED,
    "unblock": "allow them again",
    "lock": "nobody can change it, freeze the discussion",
    "unlock": "allow changes again",
    "protection": "require reviews, prevent direct changes",
    "protect": "require reviews, prevent direct changes",
    # Making something stand out, or go out of sight.
    "pin": "keep it at the top, visible to everyone, highlight as important",
    "unpin": "no longer at the top",
    "star": _KEPT,
    "bookmark": _KEPT,
    "label": "sort, organize, categorize",
    "archive": "retire it, no longer used but history kept, read only",
    "unarchive": "bring it back, reactivate",
    "minimize": "hide it from view, collapse off-topic or spam",
    "hide": "hide it from view, not shown in the list",
    "unhide": "show it again",
    "mute": _QUIET,
    "snooze": _QUIET,
    "dnd": _QUIET,
    # Time and attention.
    "schedule": "send or run it later, at a set time",
    "scheduled": "send or run it later, at a set time",
    "remind": "not forget, get reminded later",
    "reminder": "not forget, get reminded later",
    "freebusy": _FREE,
    "availability": _FREE,
    "presence": "show as away or available, not at the desk",
    "vacation": "automatic reply while away or on leave, out of office",
    "topic": "say what it is about",
    "purpose": "say what it is about",
    "subscribe": _NOTIFIED,
    "watch": _NOTIFIED,
    "watcher": _NOTIFIED,
    "follow": _NOTIFIED,
    "unsubscribe": "stop notifications",
    "unwatch": "stop notifications",
    # Messages and calls.
    "forward": _PASSED_ON,
    "forwarding": _PASSED_ON,
    "autoforward": _PASSED_ON,
    "draft": "not sent yet, save for later",
    "reaction": "respond with an emoji",
    "react": "respond with an emoji",
    "dial": "phone someone, place a call",
    "hangup": "end the call",
    "bridge": "connect two calls together",
    "transcript": "what was said, written text",
    "porting": "keep the number when switching from another provider",
    # Who took part, who did what.
    "registrant": "who signed up",
    "absentee": "who signed up but did not attend",
    "audit": "who did what and when",
    "usage": "how much was used",
    "quota": "how much is allowed, how much is left",
    # Ownership, copies and versions.
    "fork": "own copy to experiment with",
    "clone": "make another one like it",
    "duplicate": "make another one like it",
    "merge": "combine the changes into the target",
    "revision": "old versions, earlier copies, change history",
    "export": "download it in another format",
    "import": "bring it in from elsewhere",
    "assign": "make someone responsible",
    "assignee": "make someone responsible",
    # Workflows and releases.
    "transition": "move it to another status, where it can move next",
    "dependent": "what relies on it, what would break",
    "dependency": "what relies on it, what would break",
    "segment": "a group of users to target",
    "rollout": "release to a share of users",
    "experiment": "test which variant works better",
    # Keys and proof.
    "rotate": _NEW_KEY,
    "regenerate": _NEW_KEY,
    "verify": "confirm it is real or owned",
    "verification": "confirm it is real or owned",
    # Money.
    "refund": "give the money back",
    "void": "invalid, must not be paid",
    "capture": "collect the money that was reserved",
    "dispute": "chargeback",
    "payout": "withdraw money to the bank",
    # Undoing and redoing.
    "revert": _UNDONE,
    "rollback": _UNDONE,
    "restore": _UNDONE,
    "rerun": "run it again",
    "retry": "run it again",
    "cancel": "stop it, end it",
    "close": "end it, mark done or resolved",
    "publish": "make it public, announce",
    "approve": "accept, sign off",
    "dismiss": "ignore, reject",
    # Many at once.
    "bulk": _MANY,
    "batch": _MANY,
    "multiple": _MANY,
}

_RAW_RETURNED: dict[str, str] = {
    "remaining": "how much is left",
    "available": "how much is left",
    "balance": "how much money we have",
    "quota": "how much is allowed, how much is left",
}
"""Response field name -> what a user asks to learn ("how many requests do I have *left*")."""

EFFECTS: dict[str, str] = _RAW_EFFECTS
"""Mechanism word (as names and summaries write it) -> its outcome in everyday words."""

RETURNED: dict[str, str] = _RAW_RETURNED

_ACCESS = frozenset("member membership collaborator collaboration permission role access grant seat".split())
"""Nouns of who may use a thing: adding one lets someone in, removing one shuts them out."""
_ADDING = frozenset("add create invite set put update assign grant".split())
_REMOVING = frozenset("remove delete revoke kick cancel".split())
_SHUT_OUT = "they can no longer see or use it, access taken away"

_BOOKED = frozenset("event meeting appointment booking reservation webinar".split())
_TOGGLES = frozenset("flag toggle".split())
_TRACKED = frozenset("issue ticket task".split())
_PAIRED: tuple[tuple[frozenset[str], frozenset[str], str], ...] = (
    (_BOOKED, _REMOVING, "cancel it, call it off"),
    (_TOGGLES, frozenset("update patch put set".split()), "turn it on or off, roll out, kill switch"),
    (_TOGGLES, frozenset("create post add".split()), "a new toggle, kill switch"),
    (_TRACKED, frozenset(["link"]), "relate it to another, mark as duplicate, blocked by"),
)
"""(nouns, verbs, outcome): an operation doing one of the verbs to one of the nouns achieves the outcome.
The noun must be what the name acts on, its last word that is not a verb (``meeting_poll_delete``
deletes a poll, not the meeting), or, when the name has none, a word of the summary's head."""
_NAME_VERBS = _ADDING | _REMOVING | frozenset("get list insert patch post query search do".split())

OUTCOMES: tuple[str, ...] = tuple(
    dict.fromkeys([*EFFECTS.values(), *RETURNED.values(), _SHUT_OUT, _LET_IN, *(outcome for _, _, outcome in _PAIRED)])
)
"""Every outcome ``effect_phrases`` may say, each once, in a fixed order."""

MAX_ENUM_VALUES = 8
"""Values of one parameter's enum that are read, at most: a long enum is a list of codes, not of outcomes."""

MAX_WORDS = 24
"""Effect words of one action, at most."""

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
_SUMMARY_WORDS = 4
"""Leading words of the summary read for mechanisms ("Pins an item to a channel")."""


def effect_phrases(action: Action) -> list[str]:
    """What ``action`` achieves in everyday words (none for most actions), from the mechanisms its
    name's last segment and the head of its summary name, and from its response's field names."""
    out: dict[str, None] = {}
    in_name = _words(action.path.rsplit(".", 1)[-1])
    named = [_singular(word) for word in [*in_name, *_words(action.summary)[:_SUMMARY_WORDS]]]
    if not _ACCESS.isdisjoint(named):
        if not _REMOVING.isdisjoint(named):
            out[_SHUT_OUT] = None
        elif not _ADDING.isdisjoint(named):
            out[_LET_IN] = None
    objects = [word for word in named[: len(in_name)] if word not in _NAME_VERBS][-1:] or named[len(in_name) :]
    for nouns, verbs, outcome in _PAIRED:
        if not nouns.isdisjoint(objects) and not verbs.isdisjoint(named):
            out[outcome] = None
    for word in named:
        effect = EFFECTS.get(word)
        if effect is not None:
            out[effect] = None
    for word in _words(action.response_fields):
        returned = RETURNED.get(word)
        if returned is not None:
            out[returned] = None
    return list(out)


def effect_words(action: Action) -> list[str]:
    """``effect_phrases``' words, then ``enum_words``, lowercased, each once, at most ``MAX_WORDS``."""
    out = dict.fromkeys(word for phrase in effect_phrases(action) for word in _words(phrase))
    out.update(dict.fromkeys(enum_words(action)))
    out.update(dict.fromkeys(kind_words(action)))
    return list(out)[:MAX_WORDS]


MIN_KINDS = 8
"""Members an array's item must offer, most of them objects, to be read as kinds of request."""


def kind_words(action: Action) -> list[str]:
    """The words of the kinds of request a batch operation takes, commonest first: Google's
    ``spreadsheets.batchUpdate`` says only "Applies one or more updates to the spreadsheet", but its
    ``requests`` items are each one of ``addSheet``, ``updateSheetProperties``, ``mergeCells``,
    ``repeatCell``… (65 kinds): what it achieves is in those names (a tab is added or renamed there)."""
    properties = action.input_schema.get("properties") if isinstance(action.input_schema, dict) else None
    if not isinstance(properties, dict):
        return []
    counts: Counter[str] = Counter()
    for spec in properties.values():
        items = spec.get("items") if isinstance(spec, dict) and spec.get("type") == "array" else None
        members = items.get("properties") if isinstance(items, dict) else None
        if not isinstance(members, dict) or len(members) < MIN_KINDS:
            continue
        kinds = [name for name, member in members.items() if isinstance(member, dict) and _is_object(member)]
        if len(kinds) * 4 < len(members) * 3:
            continue  # a record's fields, not a choice of requests
        counts.update(word for kind in kinds for word in _words(kind))
    return [word for word, _ in counts.most_common()]


def _is_object(spec: dict[str, Any]) -> bool:
    return spec.get("type") == "object" or isinstance(spec.get("properties"), dict)


def enum_words(action: Action) -> list[str]:
    """The words of the values of its parameters' enums (``open``, ``closed``, ``private``)."""
    properties = action.input_schema.get("properties") if isinstance(action.input_schema, dict) else None
    if not isinstance(properties, dict):
        return []
    return [word for spec in properties.values() for value in _enum(spec) for word in _words(value)]


def _words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)] if text else []


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) else word


def _enum(spec: Any) -> Iterator[str]:
    """The string values of a parameter's enum (its items' for an array, its alternatives' for anyOf/oneOf)."""
    if not isinstance(spec, dict):
        return
    for schema in (spec, spec.get("items"), *(spec.get("anyOf") or ()), *(spec.get("oneOf") or ())):
        if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
            yield from (
                value for value in schema["enum"][:MAX_ENUM_VALUES] if isinstance(value, str) and len(value) <= 24
            )
