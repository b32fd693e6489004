"""What an HTTP operation does to what, read from its method and URL, for guessed names.

An agent that knows an API's shape but not its names guesses ``update_customer`` for
``POST /v1/customers/{customer}``, ``list_issues`` for ``GET /issues`` and ``customers.update`` or
``get_current_user`` alike. ``Shape`` is the operation's side of that guess: the verbs it answers
to, the resource it acts on (the last literal segment, or the one before a verb segment such as
``/cancel``), every literal word of its URL, and how deep it sits. ``Guess`` is the name's side.
Matching both is a rule, not a score: the operation's resource is named by the guess, and every
resource word of the guess is in its URL; among those that match, the shallowest is the resource's
own (``GET /issues`` before ``GET /repos/{owner}/{repo}/issues``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..vocabulary.model import Action
from ._text import identifier_terms, stem

__all__ = ["Guess", "Shape", "guess_of", "shapes_of"]

# Verbs that name the same operation in one API or another (a guessed ``create_x`` means ``add_x``).
VERB_GROUPS: tuple[tuple[str, ...], ...] = (
    ("create", "add", "new", "post", "make", "insert", "put"),
    ("delete", "remove", "destroy", "erase", "drop"),
    ("get", "fetch", "retrieve", "read", "show", "view", "describe"),
    ("list", "all"),
    ("search", "find", "query", "lookup"),
    ("update", "edit", "modify", "change", "set", "patch", "replace"),
)
GROUP_OF: dict[str, int] = {stem(verb): number for number, group in enumerate(VERB_GROUPS) for verb in group}
GROUP_VERBS: dict[int, frozenset[str]] = {
    number: frozenset(stem(verb) for verb in group) for number, group in enumerate(VERB_GROUPS)
}
_CREATE, _DELETE, _GET, _LIST, _SEARCH, _UPDATE = range(6)

# A last URL segment that is one of these is the operation's verb (``POST /deployments/{id}/cancel``).
_SEGMENT_VERBS = frozenset(
    stem(verb)
    for verb in """accept activate approve archive assign block cancel capture clone close confirm copy
    deactivate decline deploy disable dismiss download enable execute export finalize follow import invite
    lock merge move mute pause pin preview promote publish redeploy refresh refund reject rename reopen
    rerun reset resolve restart restore resume retry revoke rollback rotate run search send start stop
    subscribe suspend sync test transfer trigger unarchive unassign unblock unfollow unlock unmute unpin
    unpublish unstar unsubscribe unsuspend upload validate verify void""".split()
)
_VERSION = re.compile(r"^(v[0-9]+([._][0-9]+)*|api|rest)$")
_SELF = frozenset({"me", "myself", "current", "authenticated", "my", "mine"})
"""Words of a guess that mean the caller: ``get_current_user`` is ``GET /me``."""
_SELF_SEGMENTS = frozenset({"me", "self", "myself"})
"""URL segments that mean the caller (``self`` only there: ``self_hosted`` is not about the caller)."""
_FILLER = frozenset({"all", "by", "for", "of", "the", "a", "an", "in", "on", "to", "from", "with", "id", "ids"})
_USER = stem("user")
_MEMBER_WORDS = frozenset(stem(word) for word in "id ids key uuid slug name code ref handle identifier or".split())
"""Words of a path parameter that say only that it identifies something."""
# Verbs a guess names by what the operation achieves, not by its method: ``send_sms`` is the create of a
# message, ``share_file`` the create of a permission on the file, ``buy_phone_number`` the create of an
# order for one. Each: the verb group its operation has, and the words its resource is then named by
# (none: the guessed resource itself). General API vocabulary, not one API's names.
_MEANS: dict[str, tuple[int, frozenset[str]]] = {
    stem(verb): (group, frozenset(stem(word) for word in words.split()))
    for verb, group, words in (
        ("send", _CREATE, ""),
        ("upload", _CREATE, ""),
        ("download", _GET, ""),
        ("toggle", _UPDATE, ""),
        ("share", _CREATE, "permission acl collaborator member share"),
        ("invite", _CREATE, "invitation invite member collaborator"),
        ("buy", _CREATE, "order purchase"),
        ("purchase", _CREATE, "order purchase"),
        ("apply", _CREATE, "redemption application"),
        ("redeem", _CREATE, "redemption"),
    )
}
# Resource words a guess uses where APIs use a more general one (an email or an SMS is a message).
_ALSO_NAMED: dict[str, frozenset[str]] = {
    stem(word): frozenset(stem(other) for other in others.split())
    for word, others in (
        ("email", "message mail"),
        ("mail", "message email"),
        ("sms", "message"),
        ("mms", "message"),
        ("text", "message"),
    )
}
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@dataclass(frozen=True, slots=True)
class Shape:
    verbs: frozenset[str]
    """Verb stems the operation answers to: its method's group, or its verb segment's stem and group."""
    resource: frozenset[str]
    """Stems of the resource it acts on."""
    words: frozenset[str]
    """Stems of every literal segment of its URL."""
    member: bool
    """It acts on one member (a ``{param}`` follows the resource)."""
    mine: bool
    """Its resource is the caller (``/me``, ``/user`` without a parameter)."""
    depth: int
    """Literal segments of its URL (versions left out)."""


@dataclass(frozen=True, slots=True)
class Guess:
    verbs: frozenset[str]
    """The guessed verb's stem and those of its group."""
    resource: frozenset[str]
    """Stems of the guessed resource words (``deployment``, ``build`` for ``list_deployment_builds``)."""
    mine: bool
    """The guess names the caller (``current_user``, ``me``)."""
    plural: bool | None
    """Its last resource word is plural (``get_orders``: the collection), singular (``get_order``: one
    member); None when the spelling does not say (``orders.get``)."""
    verb: str = ""
    """The guessed verb's own stem (``send``), when its group came from what it means (``_MEANS``)."""
    named: tuple[frozenset[str], ...] = ()
    """Per guessed resource word, the stems a URL may name it by (``email``: message, mail)."""
    acted_on: frozenset[str] = frozenset()
    """The resource the verb's meaning acts on instead (``share``: a permission), with the guessed one
    as its parent or part of its name."""

    def matches(self, shape: Shape) -> bool:
        if not (self.verbs & shape.verbs and shape.resource) or not (shape.mine or not self.mine or not shape.member):
            return False
        named = self.named or tuple(frozenset({word}) for word in self.resource)
        allowed = frozenset().union(*named, self.acted_on)
        if not shape.resource <= allowed:
            return False
        if self.acted_on:
            # ``share_file``: a permission under a file; ``buy_phone_number``: a number order.
            return bool(shape.resource & self.acted_on) and bool(named[-1] & shape.words)
        return all(words & shape.words for words in named)

    def by_meaning(self, shape: Shape) -> bool:
        """Whether it matches only through what its verb means (``send_sms`` and ``POST /messages``)."""
        return bool(self.verb) and self.verb not in shape.verbs

    def rank(self, shape: Shape) -> float:
        """Lower is better among matches: the resource's own operation, then the caller's, then depth."""
        penalty = 0.5 if self.mine != shape.mine else 0.0
        if self.by_meaning(shape):
            # Matched by what the verb means: an operation named by the verb itself comes first
            # (``send_email`` is ``POST /messages/send`` before ``POST /messages``).
            penalty += 1.5
        if not self.resource <= shape.words:
            penalty += 1.0  # the resource named by another word (an SMS as a message): its own name first
        if self.verbs & GROUP_VERBS[_GET] and not self.verbs & GROUP_VERBS[_LIST]:
            # ``get_order`` is one order, ``get_orders`` (or ``fetch_orders``) the collection.
            penalty += 0.5 if shape.member == bool(self.plural) else 0.0
        return shape.depth + penalty


def shape_of(action: Action, scopes: frozenset[str] = frozenset()) -> Shape | None:
    """The operation's shape, when its binding has an HTTP method and a URL; else None. ``scopes``: the
    stems of its API's URL segments, which a parameter may name instead of the resource before it."""
    method, url = getattr(action.binding, "method", None), getattr(action.binding, "url", None)
    if not isinstance(method, str) or not isinstance(url, str):
        return None
    literals: list[tuple[frozenset[str], bool, bool]] = []  # (stems, followed by a parameter, the caller)
    scoped: set[int] = set()  # literals followed by a parameter naming another resource
    literal = ""
    for segment in url.split("?", 1)[0].split("/"):
        if "{" in segment or segment.startswith(":"):
            if literals and _scoped_by(segment, literal, literals[-1][0], scopes):
                scoped.add(len(literals) - 1)
            elif literals:
                literals[-1] = (literals[-1][0], True, literals[-1][2])
            continue
        literal = segment
        lowered = segment.lower()
        if not segment or _VERSION.match(lowered):
            continue
        mine = lowered in _SELF_SEGMENTS
        terms = frozenset({_USER} if mine else identifier_terms(segment))
        if terms:
            literals.append((terms, False, mine))
    if not literals:
        return None
    words = frozenset(term for terms, _, _ in literals for term in terms)
    last, member, mine = literals[-1]
    verb = next(iter(last)) if len(last) == 1 else ""
    if len(literals) > 1 and not member and (verb in _SEGMENT_VERBS or verb in GROUP_OF):
        verbs = frozenset({verb}) | GROUP_VERBS.get(GROUP_OF.get(verb, -1), frozenset())
        resource, member, mine = literals[-2]
        return Shape(verbs, resource, words - {verb}, member, mine or resource == {_USER}, len(literals))
    match method.lower():
        case "get":
            groups = (_GET,) if member else (_GET, _LIST)
        case "post":
            groups = (_UPDATE,) if member else (_CREATE,)
        case "put" | "patch":
            groups = (_UPDATE,)
        case "delete":
            groups = (_DELETE,)
        case _:
            return None
    verbs = frozenset(term for group in groups for term in GROUP_VERBS[group])
    caller = last == {_USER} and not member and len(literals) - 1 not in scoped
    return Shape(verbs, last, words, member, mine or caller, len(literals))


def _scoped_by(segment: str, literal: str, resource: frozenset[str], scopes: frozenset[str]) -> bool:
    """Whether a parameter after a plural ``literal`` names another resource of the API rather than a
    member: ``/flags/{projectKey}`` is a project's flags (the collection), ``/flags/{flagKey}`` one flag
    (a singular segment, ``/user/{account_id}``, is one member however its parameter is named)."""
    if not literal.lower().endswith("s") or literal.lower().endswith(("ss", "us", "is")):
        return False
    terms = set(identifier_terms(segment.strip("{}:"))) - _MEMBER_WORDS
    if not terms or not terms <= scopes:
        return False
    return not any(term.startswith(word) or word.startswith(term) for term in terms for word in resource)


def _literal_stems(actions: Sequence[Action]) -> frozenset[str]:
    out: set[str] = set()
    for action in actions:
        url = getattr(action.binding, "url", None)
        if isinstance(url, str):
            for segment in url.split("?", 1)[0].split("/"):
                if segment and "{" not in segment and not segment.startswith(":"):
                    out.update(identifier_terms(segment))
    return frozenset(out)


_SHAPES: dict[int, tuple[Sequence[Action], list[Shape | None]]] = {}
_MAX_KEPT = 512


def shapes_of(actions: Sequence[Action]) -> list[Shape | None]:
    """``shape_of`` of each action, kept per (immutable) sequence: a connector's are read once."""
    kept = _SHAPES.get(id(actions))
    if kept is not None and kept[0] is actions:
        return kept[1]
    if len(_SHAPES) >= _MAX_KEPT:
        _SHAPES.clear()
    scopes = _literal_stems(actions)
    shapes = [shape_of(action, scopes) for action in actions]
    _SHAPES[id(actions)] = (actions, shapes)  # the sequence is held, so its id is not reused meanwhile
    return shapes


def guess_of(path: str) -> Guess | None:
    """The verb and resource a guessed path names, verb first or last (``update_customer``,
    ``customers.update``); None when it names no verb or no resource."""
    parts = [[word.lower() for word in _WORDS.findall(part)] for part in path.split(".") if part]
    if not parts or not parts[-1]:
        return None
    plural: bool | None = None
    if len(parts) > 1 and len(parts[-1]) == 1 and _is_verb(parts[-1][0]):
        verb, rest = parts[-1][0], [word for part in parts[:-1] for word in part]
    else:
        flat = [word for part in parts for word in part]
        if not _is_verb(flat[0]):
            return None
        verb, rest = flat[0], flat[1:]
        named = [word for word in rest if word not in _SELF and word not in _FILLER]
        plural = bool(named) and named[-1].endswith("s") and not named[-1].endswith(("ss", "us", "is"))
    if verb in ("get", "fetch", "retrieve") and rest[:1] == ["all"]:
        verb, rest = "list", rest[1:]
    mine = any(word in _SELF for word in rest)
    terms = [term for word in rest if word not in _SELF and word not in _FILLER for term in identifier_terms(word)]
    resource = frozenset(terms)
    if mine and not resource:
        resource = frozenset({_USER})
        terms = [_USER]
    if not resource:
        return None
    stemmed = stem(verb)
    verbs = frozenset({stemmed}) | GROUP_VERBS.get(GROUP_OF.get(stemmed, -1), frozenset())
    named = tuple(frozenset({term}) | _ALSO_NAMED.get(term, frozenset()) for term in dict.fromkeys(terms))
    meaning = _MEANS.get(stemmed)
    if meaning is None or stemmed in GROUP_OF:
        return Guess(verbs, resource, mine, plural, named=named)
    group, acted_on = meaning
    return Guess(verbs | GROUP_VERBS[group], resource, mine, plural, stemmed, named, acted_on)


def _is_verb(word: str) -> bool:
    stemmed = stem(word)
    return stemmed in GROUP_OF or stemmed in _SEGMENT_VERBS or stemmed in _MEANS
