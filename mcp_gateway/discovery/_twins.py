"""Near-twins: actions that act on one object with different verbs (``customers.create`` /
``customers.delete``), which ranking tells apart least well.

- ``group_twins`` keeps each group of twins side by side in an answer, at its best member's place, and
  names every hit's twins (``SearchResult.twins``), so the agent sees the whole choice;
- ``asked_first`` gives the request's opening verb (``opening_kind``) the last word between the first
  hit and a twin of it: the model reads the object well and the verb poorly ("log work" is the
  worklog's add, though its get comes first).
"""

from __future__ import annotations

from ..vocabulary.model import Action
from ._message import asked_kind, opening_word
from ._text import VERB_KIND, VERBS, identifier_terms, stem

__all__ = ["TWIN_REACH", "asked_first", "group_twins", "opening_kind"]

TWIN_REACH = 3
"""A near-twin moves up next to the best of its group only from at most this many places below it.
Moving every twin of the first hit up pushed distinct candidates out of the top five (dev intents,
hybrid: R@5 80.6 -> 81.4 with this reach; BFCL non-live 92.2 -> 92.4); ``SearchResult.twins``
still names every twin, so the agent sees the whole choice either way."""


def _object_key(action: Action) -> tuple[str, frozenset[str]] | None:
    """What an action acts on, with its connector (``_operation``); None when its name has no verb."""
    thing, _ = _operation(action)
    if not thing or len(thing) == len(set(identifier_terms(action.path))):
        return None
    return action.connector, thing


_SWITCHES = frozenset("turn switch enable disable toggle activate deactivate".split())
"""Opening verbs that flip a thing's state: an update ("turn on the checkout flag"), never a create."""
_LIGHT_VERBS = frozenset({"make", "set"})
"""Opening verbs whose kind depends on what follows: "make a copy", "make sure", "set up", "set my status"."""
_METHOD_KINDS = {"GET": "read", "POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}
_ASKED_REACH = 5
"""How far below the first hit its twin of the asked kind is looked for: the places a reader scans."""


_REVERSIBLE = frozenset(
    "archive assign ban block delete follow hide install link lock mute pin publish register share star "
    "subscribe suspend trash watch".split()
)
"""Verbs an ``un-`` undoes (``untrash``, ``unarchive``): such an action is the undoing of its twin's."""
_UNDOING = frozenset("restore recover undelete undo".split()) | {f"un{verb}" for verb in _REVERSIBLE}
"""Opening verbs that ask to undo ("restore the deleted file", "unarchive the channel")."""
_BACK = frozenset({"put", "bring", "get", "move"})
"""Opening verbs that ask to undo when "back" follows ("put the emails back from the trash")."""
_BACK_REACH = 48
"""Characters of a request in which that "back" is looked for."""


def opening_kind(query: str) -> str | None:
    """The kind of operation (create, read, update, delete, or undo) a request's opening verb asks for: an
    everyday verb's (``asked_kind``: "log work" creates), an undoing's ("restore", "unarchive", "put it
    back": what an ``un-`` action does), a switch's ("turn on the flag" updates) or a generic verb's
    ("remove the label"); None for a light verb ("make", "set") or no verb."""
    kind = asked_kind(query)
    word = opening_word(query)
    if kind is not None or word is None:
        return kind
    if word in _UNDOING or (word in _BACK and " back " in f" {query.lower()[:_BACK_REACH]} "):
        return "undo"
    if word in _LIGHT_VERBS:
        return None
    return "update" if word in _SWITCHES else VERB_KIND.get(stem(word))


def asked_first(hits: list[tuple[Action, float]], kind: str | None) -> list[tuple[Action, float]]:
    """``hits`` with the first one's near-twin of the ``kind`` of operation the request asks for moved
    to first, when the first is of another kind ("log work": the worklog's add before its get, which
    the model puts first: it reads the object well and the verb poorly). Twins only: a hit on another
    object is never moved for its verb."""
    if kind is None or len(hits) < 2:
        return hits
    first = hits[0][0]
    thing, first_kind = _operation(first)
    if not thing or first_kind in (kind, None):
        return hits
    for position in range(1, min(len(hits), _ASKED_REACH)):
        action = hits[position][0]
        if action.connector == first.connector and _operation(action) == (thing, kind):
            return [hits[position], *hits[:position], *hits[position + 1 :]]
    return hits


def none_of_kind(hits: list[tuple[Action, float]], kind: str | None, reach: int = 5) -> bool:
    """Whether the request asks to delete (``kind``) and none of the first ``reach`` hits is a deletion:
    "delete a widget" where the best match only updates one. The answer is then not one to be sure of."""
    if kind != "delete" or not hits:
        return False
    return not any(
        _operation(action)[1] == "delete" or not _DELETING.isdisjoint(identifier_terms(action.path))
        for action, _ in hits[:reach]
    )


_DELETING = frozenset(stem(word) for word in ("trash", "purge", "erase", "destroy", "discard", "wipe", "unsubscribe"))
"""Verbs of a name that delete whatever its method (``messages_trash`` is a POST)."""


def _operation(action: Action) -> tuple[frozenset[str], str | None]:
    """What an action acts on (its name's words less verbs, ``VERB_KIND``'s too: ``post_feature_flag`` and
    ``patch_feature_flag`` act on one flag) and the kind of operation it is: "undo" for an ``un-`` of a
    ``_REVERSIBLE`` verb (``messages_untrash``: the object of ``messages_trash``), else its name's verb's,
    or its HTTP method's when its name has none or verbs of two kinds ("calendar_list_update")."""
    terms = identifier_terms(action.path)
    undone = [term[2:] for term in terms if term.startswith("un") and term[2:] in _REVERSIBLE]
    if undone:  # ``messages_untrash`` undoes ``messages_trash``: one object, the kind "undo"
        kept = [*undone, *(term for term in terms if not term.startswith("un"))]
        return frozenset(term for term in kept if term not in VERBS and term not in VERB_KIND), "undo"
    kinds = {VERB_KIND[term] for term in terms if term in VERB_KIND}
    thing = frozenset(term for term in terms if term not in VERBS and term not in VERB_KIND)
    if len(kinds) == 1:
        return thing, kinds.pop()
    method = getattr(action.binding, "method", None)
    return thing, _METHOD_KINDS.get(method.upper()) if isinstance(method, str) else None


def group_twins(hits: list[tuple[Action, float]]) -> tuple[list[tuple[Action, float]], dict[str, list[str]]]:
    """Hits with near-twins (same object, another verb) moved next to the best of their group (from at
    most ``TWIN_REACH`` places below it), and every hit's twins among ``hits``."""
    groups: dict[tuple[str, frozenset[str]], list[int]] = {}
    for position, (action, _) in enumerate(hits):
        key = _object_key(action)
        if key is not None:
            groups.setdefault(key, []).append(position)
    twins: dict[str, list[str]] = {}
    for positions in groups.values():
        if len(positions) > 1:
            names = [hits[i][0].qualified_name for i in positions]
            for name in names:
                twins[name] = [n for n in names if n != name]
    placed: set[int] = set()
    ordered: list[tuple[Action, float]] = []
    by_position = {
        positions[0]: [i for i in positions if i - positions[0] <= TWIN_REACH] for positions in groups.values()
    }
    for position in range(len(hits)):
        if position in placed:
            continue
        for i in by_position.get(position, [position]):
            placed.add(i)
            ordered.append(hits[i])
    return ordered, twins
