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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..vocabulary.model import Action
from ._text import clean_description, first_sentence, identifier_terms, prose_terms, stem

__all__ = [
    "Guess",
    "Shape",
    "collection_reads",
    "described",
    "guess_of",
    "holder_counts",
    "own_state_verb",
    "root_shares",
    "shapes_of",
]

# Verbs that name the same operation in one API or another (a guessed ``create_x`` means ``add_x``).
VERB_GROUPS: tuple[tuple[str, ...], ...] = (
    ("create", "add", "new", "post", "make", "insert", "put", "save", "append", "upsert"),
    ("delete", "remove", "destroy", "erase", "drop"),
    ("get", "fetch", "retrieve", "read", "show", "view", "describe", "info"),
    ("list", "all"),
    ("search", "find", "query", "lookup"),
    ("update", "edit", "modify", "change", "set", "patch", "replace", "write"),
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
# Verbs naming one change of state in one API or another (``void_payment`` is ``POST /payments/{id}/cancel``).
_STATE_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("cancel", "void", "abort"),
    ("complete", "capture", "finish"),
    ("publish", "send"),
    ("end", "hangup", "terminate"),
)
_STATE_GROUP: dict[str, frozenset[str]] = {
    stem(verb): frozenset(stem(other) for other in group) for group in _STATE_SYNONYMS for verb in group
}
# Verbs that change a resource's state and that an API may name by an operation of their own, else by
# an action posted to the resource or by its update (``reboot_droplet``, ``complete_task``, ``end_call``).
_STATE_VERBS = _SEGMENT_VERBS | frozenset(
    stem(verb)
    for verb in """attach boot complete detach downgrade end hangup mark power reboot rebuild redact resize
    shutdown terminate upgrade""".split()
)
_FALLBACK = 10.0
"""Added to the rank of an operation matched by a ``Guess.fallback`` verb: deeper than any URL goes."""
_ACTIONS = frozenset(stem(word) for word in ("action", "command"))
"""A sub-resource these name takes any change of state posted to it (``POST /droplets/{id}/actions``)."""
_DESCRIBED = 300
"""Characters of a description read for the words it explains an operation with."""
_VOWEL = re.compile("[aeiouy]")
_CUSTOM_METHOD = re.compile(r"(?<=[}A-Za-z0-9]):([A-Za-z]+)$")
_EXTENSION = re.compile(r"\.(json|xml)$", re.IGNORECASE)
_METHOD_DOT = re.compile(r"(?<=[A-Za-z])\.([a-z]+)$")
_VERSION = re.compile(r"^(v[0-9]+([._][0-9]+)*|api|rest)$")
_SELF = frozenset({"me", "myself", "current", "authenticated", "my", "mine", "whoami"})
"""Words of a guess that mean the caller: ``get_current_user`` is ``GET /me``, and so is the shell's ``whoami``."""
_CALLERS_LIST = 0.6
"""Taken off the rank of a list the caller holds (``GET /user/repos``) for a list guess that names no
scope (``list_repos``): an agent listing repositories means its own, not every public one
(``GET /repositories``); a guess naming someone (``list_user_repos``) is unaffected."""
_SELF_SEGMENTS = frozenset({"me", "self", "myself"})
"""URL segments that mean the caller (``self`` only there: ``self_hosted`` is not about the caller)."""
_FILLER = frozenset(
    {"all", "by", "for", "of", "the", "a", "an", "in", "on", "to", "from", "with", "id", "ids", "off", "out"}
)
_USER = stem("user")
_CALLERS = frozenset(stem(word) for word in ("user", "account", "profile"))
"""A singular segment without a parameter naming one of these is the caller's own (``GET /account``)."""
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
        ("grant", _CREATE, ""),
        ("share", _CREATE, "permission acl collaborator member share"),
        ("invite", _CREATE, "invitation invite member collaborator"),
        ("buy", _CREATE, "order purchase"),
        ("purchase", _CREATE, "order purchase"),
        ("apply", _CREATE, "redemption application"),
        ("redeem", _CREATE, "redemption"),
        ("deploy", _CREATE, "deployment"),
        ("redeploy", _CREATE, "deployment"),
        ("trigger", _CREATE, "run dispatch build event"),
        ("release", _DELETE, ""),
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
        ("item", "object entry record"),
        ("object", "item entry record"),
        ("channel", "conversation"),
    )
}
# Words that are one word spelled two ways: named by either, the resource is named by its own name.
_SAME_WORD = frozenset({frozenset({stem("email"), stem("mail")})})
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
    head: str = ""
    """The last word of its resource's name (``stack`` for ``/pull-request-stacks``)."""
    holder: frozenset[str] = frozenset()
    """Stems of the resource whose member holds its resource (``spreadsheet`` for
    ``/spreadsheets/{id}/sheets/{sheetId}``), if any."""
    root: frozenset[str] = frozenset()
    """Stems of its URL's first literal segment (``repo`` for ``/repos/{owner}/{repo}/hooks``)."""
    under_caller: bool = False
    """Its resource is held by the caller (``/user/repos``, ``/me/playlists``)."""


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
    joined: str = ""
    """Its resource words as one word (``single_sends``: ``singlesend``), as some URLs spell them."""
    fallback: frozenset[str] = frozenset()
    """Verbs of operations that do what the guess says where none named by its own verb does, ranked after
    those: a collection's search for ``list_x``; for a change of state (``reboot_droplet``,
    ``complete_task``), an action posted to the resource (``POST /droplets/{id}/actions``), else its update."""

    def matches(self, shape: Shape) -> bool:
        # The caller's own resource is one member: where no operation is the caller's (``/me``), a member's
        # get is, given the caller's own id (``rank`` puts the caller's own first).
        if not shape.resource:
            return False
        named = self.named or tuple(frozenset({word}) for word in self.resource)
        if not self.verbs & shape.verbs:
            if not self.fallback & shape.verbs:
                return False
            if shape.resource <= _ACTIONS and self.fallback & GROUP_VERBS[_CREATE]:
                return bool(shape.verbs & GROUP_VERBS[_CREATE]) and bool(named[-1] & shape.words)
            if self.fallback & GROUP_VERBS[_CREATE] and not shape.verbs & GROUP_VERBS[_UPDATE]:
                return False  # a change of state is an action posted to the resource or its update, not a create
        allowed = frozenset().union(*named, self.acted_on)
        if self.joined and shape.resource == {self.joined}:
            return True  # ``/marketing/singlesends`` for ``list_single_sends``
        if not shape.resource <= allowed:
            return False
        if self.acted_on:
            # ``share_file``: a permission under a file; ``buy_phone_number``: a number order.
            return bool(shape.resource & self.acted_on) and bool(named[-1] & shape.words)
        return all(words & shape.words for words in named)

    def named_loosely(self, shape: Shape, described: tuple[frozenset[str], frozenset[str]]) -> bool:
        """Where no operation's URL names the guess: whether ``shape`` does its verb to a resource the guess
        names by some of its words (``phone_number``: incoming phone numbers) or by the words its description
        uses (``described``: its summary's and its description's head's; a comment, where an API's stories
        are "comment stories")."""
        if not (self.verbs & shape.verbs and shape.resource) or self.acted_on or self.mine:
            return False
        if self.resource < shape.resource and shape.head in self.resource and shape.head in self.named[-1]:
            return True
        # Named only by its description: neither its summary (where "pull request stacks" are stacks) nor
        # its URL, even inside a longer word (``issuesecurityschemes``), says any of the guessed words.
        summary, description = described
        spelled = " ".join(shape.words)
        return self.resource <= description - summary and not any(word in spelled for word in self.resource)

    def holds(self, shape: Shape, holders: frozenset[str]) -> bool:
        """Where no operation does the guess's verb to its resource: whether ``shape`` updates (for a create,
        delete or update) or reads (for a get or list) a member of what holds that resource (``holders``,
        the stems of its holder in some URL): a sheet added to a spreadsheet is the spreadsheet's update,
        its sheets are listed by the spreadsheet's get."""
        changes = GROUP_VERBS[_CREATE] | GROUP_VERBS[_DELETE] | GROUP_VERBS[_UPDATE]
        if not (shape.member and shape.resource and shape.resource <= holders):
            return False
        if self.verbs & changes:
            return bool(shape.verbs & GROUP_VERBS[_UPDATE])
        # Nothing reads the part itself: the holder's read returns it (a spreadsheet's get, its sheets).
        return bool(self.verbs & (GROUP_VERBS[_GET] | GROUP_VERBS[_LIST]) and shape.verbs & GROUP_VERBS[_GET])

    def said_by(self, summary: str) -> bool:
        """Whether a summary says the guess: its verb (or one of the same change), then its resource's words
        and no other but verbs (``cancel_scheduled_send``: "Cancel or pause a scheduled send")."""
        terms = [_singular_term(term) for term in prose_terms(summary)]
        if not terms or self.mine:
            return False
        own = _STATE_GROUP.get(self.verb, frozenset({self.verb})) if self.verb else self.verbs
        rest = {term for term in terms[1:] if term not in _FILLER}
        verbs = GROUP_OF.keys() | _STATE_VERBS
        return terms[0] in own and self.resource <= rest and rest - self.resource <= verbs

    def by_meaning(self, shape: Shape) -> bool:
        """Whether it matches only through what its verb means (``send_sms`` and ``POST /messages``) or
        through a ``fallback`` verb."""
        if not self.verbs & shape.verbs:
            return True
        return bool(self.verb) and shape.verbs.isdisjoint(_STATE_GROUP.get(self.verb, {self.verb}))

    def rank(self, shape: Shape) -> float:
        """Lower is better among matches: the resource's own operation, then the caller's, then depth."""
        caller = shape.mine or (self.mine and shape.under_caller)  # the caller's repositories, for ``list_my_repos``
        penalty = (1.5 if self.mine else 0.5) if self.mine != caller else 0.0
        if not self.mine and shape.under_caller and self.verbs & GROUP_VERBS[_LIST]:
            penalty -= _CALLERS_LIST
        if not self.verbs & shape.verbs:
            # A fallback verb: after every operation the guess's own verb names; an action posted to the
            # resource before its update.
            penalty += _FALLBACK + (0.0 if shape.resource <= _ACTIONS else 0.5)
        elif self.by_meaning(shape):
            # Matched by what the verb means: an operation named by the verb itself comes first
            # (``send_email`` is ``POST /messages/send`` before ``POST /messages``).
            penalty += 1.5
        if not all(_named_alike(word, shape.words) for word in self.resource):
            penalty += 1.0  # the resource named by another word (an SMS as a message): its own name first
        one_or_all = self.verbs & (GROUP_VERBS[_GET] | GROUP_VERBS[_DELETE] | GROUP_VERBS[_UPDATE])
        if one_or_all and not self.verbs & GROUP_VERBS[_LIST] and not (self.mine and shape.mine):
            # ``get_order`` is one order, ``get_orders`` (or ``fetch_orders``) the collection; so for a delete
            # (``delete_bounce``: one bounce, ``delete_bounces``: the collection's bulk delete) and an update.
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
    literal = spelled = ""  # the last literal segment; the last one kept, as written
    heads: list[str] = []  # each kept literal's last word
    callers: list[bool] = []  # each kept literal: it names the caller
    path = url.split("?", 1)[0]
    # A custom method (``/sheets/{sheetId}:copyTo``, ``/values:batchGet``) is a verb segment of its own.
    path = _CUSTOM_METHOD.sub(lambda m: f"/{_custom_verb(m.group(1))}", path)
    # ``Messages.json`` is the messages; a one-word method after a dot (``/conversations.create``,
    # ``/admin.users.invite``) is a segment of its own.
    path = _METHOD_DOT.sub(r"/\1", _EXTENSION.sub("", path))
    for segment in path.split("/"):
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
        ordered = [_USER] if mine else _terms(segment)
        if ordered:
            # ``/me/playlists``, ``/user/repos``: what follows is the caller's own.
            callers.append(mine or (len(ordered) == 1 and ordered[0] in _CALLERS and not _plural(lowered)))
            literals.append((frozenset(ordered), False, mine))
            heads.append(next((term for term in reversed(ordered) if term not in _FILLER), ordered[-1]))
            spelled = lowered
    if not literals:
        return None
    words = frozenset(term for terms, _, _ in literals for term in terms)
    last, member, mine = literals[-1]
    # A plural last segment is a collection, not a verb (``/suppression/blocks``, ``/marketing/lists``).
    verb = next(iter(last)) if len(last) == 1 and not _plural(spelled) else ""
    if len(literals) > 1 and not member and (verb in _STATE_VERBS or verb in GROUP_OF):
        verbs = frozenset({verb}) | GROUP_VERBS.get(GROUP_OF.get(verb, -1), frozenset())
        resource, member, mine = literals[-2]
        if not member and verb in GROUP_VERBS[_GET]:
            # ``POST /institutions/get``: the URL names no member; the body says which, if any (an
            # ``institution_id`` it requires). Without one, the read is of the collection, as a GET of it is.
            if _takes_id(action, resource):
                member = True
            else:
                verbs |= GROUP_VERBS[_LIST]
        caller = mine or resource == {_USER}
        holder = _holder(literals, 3)
        return Shape(verbs, resource, words - {verb}, member, caller, len(literals), heads[-2], holder, literals[0][0])
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
    if len(literals) == 1 and not member and last <= GROUP_VERBS[_SEARCH]:
        # ``GET /search`` or ``POST /search`` ("Search for issues using JQL"): a read of what its summary
        # says it searches, the collection a ``list_issues`` guess means where no URL lists them.
        searched = _searched(action.summary)
        if searched:
            reads = GROUP_VERBS[_SEARCH] | GROUP_VERBS[_LIST] | GROUP_VERBS[_GET]
            return Shape(reads, searched, words | searched, False, False, 1, next(iter(searched)), root=literals[0][0])
    # ``GET /user`` and ``GET /account`` are the caller's own; ``GET /users`` the collection.
    caller = len(last) == 1 and last <= _CALLERS and not _plural(spelled) and not member
    caller = caller and len(literals) - 1 not in scoped
    # ``/users/me`` is as deep as ``/user``: the caller's segment adds no depth.
    depth = len(literals) - mine
    # ``/user/repos``: the caller's own repositories, what a guess naming the caller means.
    under_caller = any(named and not literals[i][1] for i, named in enumerate(callers[:-1]))
    return Shape(
        verbs, last, words, member, mine or caller, depth, heads[-1], _holder(literals, 2), literals[0][0], under_caller
    )


def _searched(summary: str) -> frozenset[str]:
    """What a summary opening with a search verb says is searched ("Search for issues using JQL": the
    issue), else nothing."""
    terms = prose_terms(summary)
    if not terms or terms[0] not in GROUP_VERBS[_SEARCH]:
        return frozenset()
    after = next((term for term in terms[1:] if term not in _FILLER), None)
    return frozenset({_singular_term(after)}) if after and after not in GROUP_OF else frozenset()


def _takes_id(action: Action, resource: frozenset[str]) -> bool:
    """Whether ``action`` requires the id of one ``resource`` (``institution_id``, ``institutionId``)."""
    required = action.input_schema.get("required")
    if not isinstance(required, list):
        return False
    for name in required:
        words = [word.lower() for word in _WORDS.findall(name)] if isinstance(name, str) else []
        if len(words) > 1 and words[-1] == "id" and not resource.isdisjoint(_terms(words[-2])):
            return True
    return False


def own_state_verb(term: str) -> bool:
    """Whether index term ``term`` is a verb of one change of state ("rollback", "lock", "reboot"), neither
    a generic create, read, update or delete nor one read as another (``_MEANS``: "send" creates)."""
    return term in _STATE_VERBS and term not in GROUP_OF and term not in _MEANS


def _holder(literals: list[tuple[frozenset[str], bool, bool]], back: int) -> frozenset[str]:
    """The resource ``back`` literals from the end, when a member of it holds the one after it."""
    return literals[-back][0] if len(literals) >= back and literals[-back][1] else frozenset()


def _custom_verb(method: str) -> str:
    """A custom method's verb (``batchUpdate`` -> ``update``, ``getByDataFilter`` -> ``get``), else the method."""
    return next((word for word in _WORDS.findall(method) if _is_verb(word.lower())), method).lower()


def described(action: Action) -> tuple[frozenset[str], frozenset[str]]:
    """Stems (singular, as a guess's are) of an action's summary, and of its description's head: the other
    words an API explains its own names with ("comment stories")."""
    summary = frozenset(_singular_term(term) for term in prose_terms(first_sentence(action.summary)))
    text = clean_description(action.description or action.summary, _DESCRIBED)
    return summary, frozenset(_singular_term(term) for term in prose_terms(text))


def _terms(text: str) -> list[str]:
    """Index terms of a name, a plural the stemmer keeps made singular (``ips`` -> ``ip``), so that a
    guess and a URL name one resource alike whatever their number."""
    return [_singular_term(term) for term in identifier_terms(text)]


def _singular_term(term: str) -> str:
    # A verb's stem ending in s is no plural: ``closed`` is ``clos``, not a ``clo``.
    if term in _STATE_VERBS or term in GROUP_OF:
        return term
    return term[:-1] if _plural(term) and _VOWEL.search(term[:-1]) else term


def _plural(word: str) -> bool:
    return word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _scoped_by(segment: str, literal: str, resource: frozenset[str], scopes: frozenset[str]) -> bool:
    """Whether a parameter after a plural ``literal`` names another resource of the API rather than a
    member: ``/flags/{projectKey}`` is a project's flags (the collection), ``/flags/{flagKey}`` one flag
    (a singular segment, ``/user/{account_id}``, is one member however its parameter is named)."""
    if not literal.lower().endswith("s") or literal.lower().endswith(("ss", "us", "is")):
        return False
    terms = set(_terms(segment.strip("{}:"))) - _MEMBER_WORDS
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
                    out.update(_terms(segment))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class _Read:
    actions: Sequence[Action]
    shapes: list[Shape | None]
    held: dict[frozenset[str], int]
    roots: dict[frozenset[str], float]


_SHAPES: dict[int, _Read] = {}
_MAX_KEPT = 512


def _read(actions: Sequence[Action]) -> _Read:
    """The shapes of ``actions``, their holders' counts and their roots' shares, kept per (immutable)
    sequence: a connector's are read once."""
    kept = _SHAPES.get(id(actions))
    if kept is not None and kept.actions is actions:
        return kept
    if len(_SHAPES) >= _MAX_KEPT:
        _SHAPES.clear()
    scopes = _literal_stems(actions)
    shapes = [shape_of(action, scopes) for action in actions]
    held: dict[frozenset[str], set[frozenset[str]]] = {}
    roots = Counter(shape.root for shape in shapes if shape is not None)
    for shape in shapes:
        if shape is not None and shape.holder:
            held.setdefault(shape.holder, set()).add(shape.resource)
    most = max(roots.values(), default=1)
    read = _Read(
        actions,
        shapes,
        {holder: len(resources) for holder, resources in held.items()},
        {root: count / most for root, count in roots.items()},
    )
    _SHAPES[id(actions)] = read  # the sequence is held, so its id is not reused meanwhile
    return read


def collection_reads(actions: Sequence[Action]) -> list[bool]:
    """Per action, whether it reads a whole collection (a GET of no member, not the caller's own): what an
    agent asks to *list*. Its shapes are not kept (``shapes_of`` keeps them, for suggestions): the
    index reads this once per connector it builds."""
    scopes = _literal_stems(actions)
    listing = GROUP_VERBS[_LIST]
    out: list[bool] = []
    for action in actions:
        shape = shape_of(action, scopes)
        out.append(shape is not None and not shape.member and not shape.mine and listing <= shape.verbs)
    return out


def shapes_of(actions: Sequence[Action]) -> list[Shape | None]:
    """``shape_of`` of each action."""
    return _read(actions).shapes


def holder_counts(actions: Sequence[Action]) -> dict[frozenset[str], int]:
    """How many kinds of resources each holder holds across these actions' URLs (``/workspaces/{id}/...``)."""
    return _read(actions).held


def root_shares(actions: Sequence[Action]) -> dict[frozenset[str], float]:
    """Each URL root's share of these actions' operations, the commonest's 1.0 (``/repos/...`` on GitHub):
    the scope an unqualified name most likely means."""
    return _read(actions).roots


def guess_of(path: str) -> Guess | None:
    """The verb and resource a guessed path names, verb first or last (``update_customer``,
    ``customers.update``); None when it names no verb or no resource."""
    parts = [[word.lower() for word in _WORDS.findall(part)] for part in path.split(".") if part]
    if not parts or not parts[-1]:
        return None
    plural: bool | None = None
    if len(parts) > 1 and len(parts[-1]) == 1 and _is_verb(parts[-1][0]):
        verb, rest = parts[-1][0], [word for part in parts[:-1] for word in part]
    elif parts[-1] and all(word in _SELF for word in parts[-1]):
        verb, rest = "get", [word for part in parts for word in part]  # ``users.me``: the caller, read
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
    terms = [term for word in rest if word not in _SELF and word not in _FILLER for term in _terms(word)]
    resource = frozenset(terms)
    if mine and not resource:
        resource = frozenset({_USER})
        terms = [_USER]
    stemmed = stem(verb)
    if not resource and stemmed in _SESSION_VERBS:
        resource = frozenset({_SESSION})  # ``login``: a session made, ``logout``: one deleted
        terms = [_SESSION]
    if not resource:
        return None
    group = GROUP_OF.get(stemmed, _SESSION_VERBS.get(stemmed, -1))
    verbs = frozenset({stemmed}) | GROUP_VERBS.get(group, frozenset())
    named = tuple(
        frozenset({term}) | _ALSO_NAMED.get(term, frozenset()) | (_CALLERS if mine and term == _USER else frozenset())
        for term in dict.fromkeys(terms)
    )
    verbs |= _STATE_GROUP.get(stemmed, frozenset())
    fallback = frozenset()
    if stemmed in GROUP_VERBS[_LIST]:
        fallback = GROUP_VERBS[_SEARCH]  # a collection listed only by its search (``POST /team-members/search``)
    elif stemmed in _STATE_VERBS and stemmed not in GROUP_OF:
        fallback = GROUP_VERBS[_CREATE] | GROUP_VERBS[_UPDATE]
    meaning = _MEANS.get(stemmed)
    written = [word for word in rest if word not in _SELF and word not in _FILLER]
    joined = _terms("".join(written)) if len(written) > 1 else []
    if meaning is None or stemmed in GROUP_OF:
        return Guess(verbs, resource, mine, plural, named=named, joined="".join(joined[:1]), fallback=fallback)
    group, acted_on = meaning
    return Guess(verbs | GROUP_VERBS[group], resource, mine, plural, stemmed, named, acted_on)


_SESSION = stem("session")
_SESSION_VERBS = {
    stem(verb): group
    for verbs, group in (("login signin logon", _CREATE), ("logout signout logoff", _DELETE))
    for verb in verbs.split()
}
"""Verbs that say, alone, the create or delete of a session."""


def _named_alike(word: str, words: frozenset[str]) -> bool:
    return word in words or any(word in same and not same.isdisjoint(words) for same in _SAME_WORD)


def _is_verb(word: str) -> bool:
    stemmed = stem(word)
    return stemmed in GROUP_OF or stemmed in _STATE_VERBS or stemmed in _MEANS or stemmed in _SESSION_VERBS
