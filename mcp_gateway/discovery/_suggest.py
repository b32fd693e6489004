"""Suggestions for a guessed tool name: the ``action_not_found`` path.

Models often call a name they made up before they search: ``github.create_issue``,
``github.createIssue``, ``issues.create``, ``github.issue.create``, ``github.add_issue``. The
answer is the closest real actions. What ``resolve`` finds (same name up to case and separators)
comes first; the rest are BM25 hits for the guessed name's words (misspelled words repaired against
the words of action names, synonyms of each word added), re-ranked by word overlap with each hit's
path, character similarity, and the search score. A leading segment naming a visible connector
restricts the hits to it when that finds anything.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ..vocabulary.model import Action
from ._rest_shape import GROUP_OF, GROUP_VERBS, Guess, guess_of, holder_counts, own_state_verb, root_shares, shapes_of
from ._rest_shape import described as described_words
from ._segment import summary_of
from ._text import SYNONYMS, fold_name, identifier_terms, prose_terms, stem

if TYPE_CHECKING:
    from ._index import DiscoveryIndex
    from ._rest_shape import Shape
    from ._segment import Segment

__all__ = ["guess_as_query", "suggest"]

_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_POOL = 50
"""How many search hits are re-ranked by name similarity."""

_REPAIR_WEIGHT = 0.5
"""Query weight of a name word standing in for a misspelled word of a guessed name."""

_SYNONYM_WEIGHT = 0.5
"""Query weight of a synonym of a guessed word ("add" -> create)."""

_SHAPED = 0.35
"""Added to the score of an operation whose method and URL are the guess's verb and resource."""

_SHAPED_STEP = 0.3
"""Taken off that per step of ``Guess.rank`` behind the best match (a literal URL segment deeper, or
the wrong one of the caller's or someone's, a member or the collection): the resource's own first."""

_OTHER_VERB = 0.05
"""Taken off an operation whose method does another verb than the guess's, when none matched its shape."""

_SAME_NAME = 0.5
"""Added to the score of an action whose name is the guess but for a verb's synonym or a word's number."""

_UNMEANT = 0.3
"""Taken off an action the guess's verb spells alike but does not mean, when some operation is what it
means (``buy_phone_number``: ``create_number_order``, not ``update_phone_number``)."""

_LOOSE = 0.75
"""Share of that kept by an operation whose URL does not name the guess's resource (``named_loosely``)."""

_SCOPE = 0.05
"""Added to a match by how many kinds of resources its holder holds, the most of the matches' getting it all."""

_ROOT = 0.03
"""Added to a suggestion by its URL root's share of its API's operations: between near ties, the API's
main scope (a repository's webhooks before an organization's on GitHub)."""

_SAID_BEHIND = 1.0
"""Rank steps behind the best URL match of an operation whose summary says the guess."""

_PLAIN = 0.05
"""Added to the plainest of several requests to one method and URL (a collection's saved variants: ``GET
/files/{id}`` as is, and with ``fields=tags`` or ``fields=metadata``): the resource itself, not a view of it."""

_WRITES = 0.1
"""Taken off a write (a create, update or delete whose name says no read, as ``freebusy_query`` does)
suggested for a guess that reads (``search_people``, ``list_subscriptions``): where no operation matched
its verb and resource, a read of the same words comes first."""

_OWN_NOUN = 5.0
"""Rank steps after the operations a guess's verb itself names (and before those it falls back on, ten
steps on) of one doing that verb as its noun (``POST /locks/{path}`` for ``lock_file``)."""

_SHAPED_POOL = 8
"""How many of the operations the guess's verb and resource name are ranked, the shallowest first."""

_MIN_SHAPE = 0.6
"""A suggestion sharing no word with the guess must at least look like it (difflib ratio)."""

# Verbs that name the same operation in one API or another: a guessed ``create_x`` means ``add_x``
# as much as ``add_x`` means ``create_x``. (Search ranks with one-way synonyms because there the
# agent's word is evidence; here the guess is only a spelling of an action that exists.)
_GROUP_OF = GROUP_OF
_GROUP_VERBS = GROUP_VERBS
_READ_VERBS = GROUP_VERBS[GROUP_OF[stem("get")]]
_READS = frozenset().union(*(GROUP_VERBS[GROUP_OF[stem(verb)]] for verb in ("get", "list", "search")))
_CALLER_WORDS = frozenset({"me", "myself", "self", "current", "authenticated", "my", "mine", "whoami"})
"""A name's words (as spelled) that mean the caller."""
_CALLER = "me"
_LIST = stem("list")


def suggest(
    index: DiscoveryIndex,
    name: str,
    *,
    limit: int = 3,
    connectors: Collection[str] | None = None,
    allow: Callable[[Action], bool] | None = None,
) -> list[Action]:
    """The actions of ``index`` closest to the guessed ``name``, best first; see the module docstring."""
    name = name.strip()
    if limit <= 0 or not name:
        return []
    visible = index._visible(connectors)
    visible_slugs = {segment.slug for segment in visible}
    exact = index.resolve(name)
    if exact is not None and (exact.connector not in visible_slugs or (allow is not None and not allow(exact))):
        exact = None  # hidden by the permission view: it must not leak through a suggestion either

    parts = [part for part in name.split(".") if part]
    if not parts:
        return [exact] if exact is not None else []
    named = [
        index._segments[slug]
        for slug in (index._slugs_by_fold.get(fold_name(parts[0]), ()) if len(parts) > 1 else ())
        if slug in visible_slugs
    ]
    path = ".".join(parts[1:] if named else parts)
    if not named:
        # ``get_salesloft_person``, ``upload_file_to_files_com``: the product named inside the guess.
        named, path = _named_inside(index, path, visible_slugs)
    path = _spelled_out(path)
    if exact is None and not named:
        exact = _unique_path(index, path, visible, allow)  # ``issues.create_label``: the name, connector left out
    guessed = [
        term for part in path.split(".") for word in _collapse(_WORDS.findall(part)) for term in identifier_terms(word)
    ]
    weighted = dict.fromkeys(guessed, 1.0)
    derived: dict[str, str] = {}
    for term in guessed:
        # A word of some other connector's names is still unknown to the one the guess names; a generic verb
        # ("read") is known to every API, whatever its names say.
        if term not in index._name_df or (named and term not in _GROUP_OF and not _names_use(named, term)):
            # A word of another form ("subscribe" where names say subscription) counts as that name word;
            # a misspelled one ("isues") has no postings: add its nearest name words instead.
            forms = index._word_forms(term) or index._derived(term)
            if named:
                forms = [form for form in forms if _names_use(named, form)]
            if forms:
                derived[term] = forms[0]
            for repair in forms or difflib.get_close_matches(term, index._vocabulary(), n=2, cutoff=0.75):
                weighted.setdefault(repair, _REPAIR_WEIGHT)
        for synonym in (*SYNONYMS.get(term, ()), *_GROUP_VERBS.get(_GROUP_OF.get(term, -1), ())):
            weighted.setdefault(synonym, _SYNONYM_WEIGHT)

    guessed = [derived.get(term, term) for term in guessed]
    hits = index._top(index._score(weighted, named or visible), _POOL, allow) if weighted else []
    if not hits and named:
        hits = index._top(index._score(weighted, visible), _POOL, allow)
    # ``update_customer``, ``customers.update``, ``list_issues``: what an operation does to what, read
    # from its method and URL, over every visible action (the words may not reach the search's pool).
    guess = (
        _noun_reading(path, derived, named or visible)
        or _membership(path, named or visible)
        or guess_of(path)
        or _denominal(path, named or visible)
    )
    shaped: dict[str, float] = {}
    noun_read: set[str] = set()  # operations on the guess's verb read as its noun (``_verb_nouns``)
    plain: frozenset[str] = frozenset()  # of requests sharing a method and URL, those fixing fewest parameters
    meant: set[str] = set()  # matched only through what the guess's verb means
    other_verb: set[str] = set()  # operations whose method and URL do something else than the guess's verb
    loose: set[str] = set()  # matched only by ``Guess.named_loosely``
    held: dict[str, int] = {}  # per match, how many kinds of resources its holder holds
    best_rank = 0.0
    if guess is not None:
        matched: list[tuple[float, str, Action]] = []
        own_matched = False  # some operation's method or verb segment is the guess's verb itself
        for segment in named or visible:
            scope = holder_counts(segment.actions)
            for action, shape in zip(segment.actions, shapes_of(segment.actions), strict=True):
                if shape is None:
                    continue
                if not guess.verbs & shape.verbs:
                    other_verb.add(action.qualified_name)
                if guess.matches(shape) and (allow is None or allow(action)):
                    # Between two as deep, the one under the resource that holds the most kinds of things
                    # (a workspace's teams before a user's): the API's own scope.
                    held[action.qualified_name] = scope.get(shape.holder, 0) if shape.holder else 0
                    matched.append((guess.rank(shape), action.qualified_name, action))
                    own_matched = own_matched or bool(guess.verbs & shape.verbs)
                    if guess.by_meaning(shape):
                        meant.add(action.qualified_name)
        # ``lock_file``: the create of a lock (``POST /locks/{path}``), ``unlock_file`` its delete, where no
        # URL locks the file itself: before its update, which the verb only falls back on.
        nouns = [] if own_matched else _verb_nouns(guessed[:1], path, named or visible, allow)
        matched.extend(nouns)
        noun_read = {qualified_name for _, qualified_name, _ in nouns}
        if not matched:
            # No URL names the guess: read its resource more loosely, behind any that did.
            for segment in named or visible:
                for action, shape in zip(segment.actions, shapes_of(segment.actions), strict=True):
                    if (
                        shape is not None
                        and guess.verbs & shape.verbs  # before reading its description: the cheap test first
                        and guess.named_loosely(shape, described_words(action))
                        and (allow is None or allow(action))
                    ):
                        matched.append((guess.rank(shape), action.qualified_name, action))
                        loose.add(action.qualified_name)
        if not matched:
            # Nothing does it to the resource itself: the update of what holds it (``add_sheet``: the
            # spreadsheet's update, where its sheets are ``/spreadsheets/{id}/sheets/{sheetId}``), or
            # its read (``list_sheets``: the spreadsheet's get).
            for segment in named or visible:
                shapes = shapes_of(segment.actions)
                holders = frozenset().union(
                    *(shape.holder for shape in shapes if shape is not None and shape.resource == guess.resource)
                )
                for action, shape in zip(segment.actions, shapes, strict=True):
                    if shape is not None and guess.holds(shape, holders) and (allow is None or allow(action)):
                        matched.append((shape.depth, action.qualified_name, action))
        # Between operations as deep (one URL and method, several requests: Postman's ``lock_a_file`` and
        # ``update_a_file_s_information`` are both ``PUT /files/{id}``), those whose names say the guess first:
        # only ``_SHAPED_POOL`` of them are ranked.
        matched.sort(key=lambda item: (item[0], -_overlap(guessed, identifier_terms(item[2].path)), item[1]))
        pooled = {id(action) for _, action, _ in hits}
        best_rank = matched[0][0] if matched else 0.0
        for rank, qualified_name, action in matched[:_SHAPED_POOL]:
            shaped[qualified_name] = rank
            if id(action) not in pooled:
                hits.append((-1, action, 0.0))
        plain = _plainest([action for _, _, action in matched[:_SHAPED_POOL]])
        # A summary that says the guess ("Validate an email" for ``validate_email``) names its operation in
        # the API's own words, whatever its URL (``POST /validations/email``): first, unless the guess's
        # own verb names an operation's URL, then just behind it.
        own = any(name not in meant for name in shaped)
        for _, action, _ in hits:
            if guess.said_by(summary_of(action)):
                said = best_rank + (_SAID_BEHIND if own else 0.0)
                shaped[action.qualified_name] = min(shaped.get(action.qualified_name, said), said)
                meant.discard(action.qualified_name)

    by_url = any(name not in loose for name in shaped)
    most_held = max((held.get(name, 0) for name in shaped), default=0) or 1
    tied = sum(rank == best_rank for rank in shaped.values()) > 1
    folded_path = fold_name(path)
    spelled_words = _words_of(path)
    spelled = _spelled(path)
    best = max((score for _, _, score in hits), default=0.0) or 1.0
    spelled_alike = bool(meant) and any(_spelled_alike(spelled_words, _words_of(action.path)) for _, action, _ in hits)
    scored: list[tuple[float, str, Action]] = []
    # Any word for the caller is another's (``get_current_user``, ``users.me`` ~ ``get_self``); the index
    # leaves "me" out of a name's terms, so the caller is one word of its own here.
    caller = not _CALLER_WORDS.isdisjoint(spelled_words)
    if caller and named:
        # An API without a URL for the caller says it in words: GraphQL's ``viewer`` is "The currently
        # authenticated user." Those read as the caller, wherever the search ranked them.
        pooled_ids = {id(action) for _, action, _ in hits}
        for segment in named:
            for action in segment.actions:
                if id(action) not in pooled_ids and _is_the_caller(action) and (allow is None or allow(action)):
                    hits.append((-1, action, 0.0))
    # ``get_call_recordings`` reads a collection: spelled as its list is spelled too.
    reads_all = guess is not None and guess.plural and guess.verbs == _READ_VERBS
    listed = [_LIST if term in _READ_VERBS else term for term in guessed] if reads_all else []
    # ``get_issue_comments``: the comments of one issue, a collection some URL holds under the issue the
    # guess names; then a summary saying "Get an issue comment" (one member) is not what it spells.
    nested = (
        reads_all
        and guess is not None
        and _holds_named(index, [action for _, action, _ in hits if action.qualified_name in shaped], guess.resource)
    )
    reads = guess is not None and not guess.verbs.isdisjoint(_READS) and not guess.verb
    # The guess's opening verb when it names one change of state (``rollback_deploy``), else "".
    own_verb = guessed[0] if guessed and own_state_verb(guessed[0]) else ""
    # Whether an operation read first by the guess's verb and resource spells that verb as the guess does.
    verb_spelled = bool(spelled_words) and any(
        rank == best_rank and spelled_words[0] in _spelled(name) for name, rank in shaped.items()
    )
    for _, action, score in hits:
        words = identifier_terms(action.path)
        if caller and _is_the_caller(action):
            # It is what the guess's words for the caller and its kind ("current", "user") name.
            words = [*words, _CALLER, *(term for term in guessed if term in _CALLER_TERMS)]
        elif caller and not _CALLER_WORDS.isdisjoint(_words_of(action.path)):
            words = [*words, _CALLER]
        if action.qualified_name in noun_read:
            words = [*words, own_verb]  # ``DELETE /locks/{path}`` is what ``unlock`` says
        overlap = _overlap([*guessed, _CALLER] if caller else guessed, words)
        if listed:
            overlap = max(overlap, _overlap(listed, words))
        shape = difflib.SequenceMatcher(None, folded_path, fold_name(action.path), autojunk=False).ratio()
        if not overlap and shape < _MIN_SHAPE and action.qualified_name not in shaped:
            continue  # shares no word and barely a letter sequence: noise, not a suggestion
        theirs = _spelled(action.path)
        spelling = 2 * len(spelled & theirs) / (len(spelled) + len(theirs)) if spelled and theirs else 0.0
        described = _overlap(guessed, prose_terms(summary_of(action)))
        # Word overlap is order-free ("create_issue" ~ "issues.create") and knows verb synonyms; guesses
        # are often the summary in snake_case ("create_pull_request" is "Create a pull request"); shape
        # catches what word splitting misses; exact spelling tells "rulesets" from "ruleset"; the search
        # score leans toward what the action is about.
        final = 0.4 * overlap + 0.2 * described + 0.2 * shape + 0.1 * spelling + 0.1 * score / best
        own_shape = _shape_in(index, action)
        if described == 1.0 and not (nested and own_shape is not None and own_shape.member):
            final += 0.15  # the guess *is* the summary, word for word: the strongest evidence there is
        rank = shaped.get(action.qualified_name)
        # The name but for a verb's synonym or a word's number is what the guess spells, unless its method
        # and URL say the guess means another (``get_customer`` is one customer, not ``get_customers``).
        theirs_words = _words_of(action.path)
        if spelled_words == _ungrouped(action.path) and (rank is None or rank <= best_rank or not verb_spelled):
            # The action's own name but for its group (``add_labels`` for ``issues.add_labels``): what the
            # guess spells, before an operation its verb's synonym and resource read first (``create_label``).
            final += _SAME_NAME
        elif (rank is None or rank <= best_rank) and (
            _same_name(spelled_words, theirs_words) or spelled_words == _verb_first(action.path)
        ):
            final += _SAME_NAME
        elif own_verb and own_verb in words and set(guessed) <= set(words):
            # A verb of its own ("rollback", "lock"), not a generic one, and every guessed word: the name
            # says the guess with a qualifier or two (``rollback_site_deploy`` for ``rollback_deploy``).
            final += _SAME_NAME
        elif (
            rank is None
            and by_url
            and guess is not None
            and (guess.verb or action.qualified_name in other_verb or (noun_read and own_verb in words))
        ):
            # Some operation does what the guess says: one doing something else (a delete for ``list_x``, or
            # its verb to another resource: a user's unlock for ``unlock_file``) is not it, however alike it
            # is spelled.
            final -= _UNMEANT
        elif rank is None and not shaped and action.qualified_name in other_verb:
            final -= _OTHER_VERB  # nothing matched: between near ties, the one whose method does the guess's verb
        if rank is not None:
            # The operation the guess's verb and resource name: before any that only spells alike, the
            # resource's own (the shallowest) first.
            # Only the verb's meaning matched: an action spelled as guessed (``send_messages``) wins.
            if action.qualified_name not in meant or not spelled_alike:
                bonus = max(0.0, _SHAPED - _SHAPED_STEP * (rank - best_rank))
                final += bonus * _LOOSE if action.qualified_name in loose else bonus
                # Between two as deep, the one under the resource holding the most kinds of things (a
                # workspace's teams before a user's): the API's own scope.
                if rank == best_rank and tied:
                    final += _SCOPE * held.get(action.qualified_name, 0) / most_held
                if rank == best_rank and action.qualified_name in plain:
                    final += _PLAIN
        if own_shape is not None:
            final += _ROOT * _root_share(index, action, own_shape, guessed)
            if reads and rank is None and own_shape.verbs.isdisjoint(_READS) and _READS.isdisjoint(words):
                final -= _WRITES
        scored.append((final, action.qualified_name, action))
    scored.sort(key=lambda item: (-item[0], item[1]))
    out = [exact] if exact is not None else []
    out.extend(action for _, _, action in scored if action is not exact)
    return out[:limit]


_CALLER_SAID = frozenset(stem(word) for word in ("current", "currently", "authenticated", "logged", "signed"))
_CALLER_IS = frozenset(stem(word) for word in ("user", "viewer", "account", "profile", "me"))
_CALLER_TERMS = _CALLER_SAID | _CALLER_IS | frozenset(stem(word) for word in _CALLER_WORDS)
_CALLER_FILLER = frozenset(
    stem(word) for word in ("get", "retrieve", "return", "returns", "fetch", "information", "info", "details", "in")
)


def _is_the_caller(action: Action) -> bool:
    """Whether ``action``'s summary says it reads the caller itself: "The currently authenticated user.",
    "Get the signed-in user's profile"; not something of the caller's ("List repositories for the
    authenticated user")."""
    terms = set(prose_terms(summary_of(action)))
    if not terms & _CALLER_SAID or not terms & _CALLER_IS:
        return False
    return not terms - _CALLER_SAID - _CALLER_IS - _CALLER_FILLER


def _plainest(actions: list[Action]) -> frozenset[str]:
    """Of ``actions`` that share a method and URL with another of them, those taking the fewest parameters."""
    groups: dict[tuple[str, str], list[Action]] = {}
    for action in actions:
        method, url = getattr(action.binding, "method", None), getattr(action.binding, "url", None)
        if isinstance(method, str) and isinstance(url, str):
            groups.setdefault((method, url), []).append(action)
    out: set[str] = set()
    for group in groups.values():
        if len(group) > 1:
            counts = [len(action.input_schema.get("properties") or {}) for action in group]
            fewest = min(counts)
            if counts.count(fewest) < len(group):
                out.update(a.qualified_name for a, count in zip(group, counts, strict=True) if count == fewest)
    return frozenset(out)


def _noun_reading(path: str, derived: dict[str, str], segments: list[Segment]) -> Guess | None:
    """A guess opening with a verb whose noun its API names things by, read as the creation of that noun,
    when some operation of ``segments`` is that: ``verify_identity`` -> ``create_identity_verification``;
    ``subscribe_channel`` -> ``create_subscription`` where no channel subscription is a resource (doing
    it is making one). None when neither reading names an operation, or the guess opens otherwise."""
    head, dot, last = path.rpartition(".")
    words = _words_of(last)
    noun = derived.get(stem(words[0])) if words else None
    if noun is None or not noun.endswith(_ACTION_NOUNS):
        return None
    for words_read in ([*words[1:], noun], [noun]):
        guess = guess_of(f"{head}{dot}create_{'_'.join(words_read)}")
        if guess is not None and _reads_some(guess, segments):
            return guess
    return None


_ACTION_NOUNS = ("tion", "sion")


_INTO = frozenset({"to", "into", "from", "in"})
_MEMBERSHIP_NOUNS = ("membership", "member")
_JOINING = frozenset(_GROUP_OF[stem(verb)] for verb in ("create", "delete"))
"""Verb groups of joining a group and leaving it."""


def _membership(path: str, segments: list[Segment]) -> Guess | None:
    """``add_person_to_cadence`` -> the create of a cadence membership (``POST /cadence_memberships``,
    ``POST /teams/{id}/members``), ``remove_user_from_group`` its delete: where some operation of
    ``segments`` is that. None for a guess not shaped ``<verb>_<thing>_to|from_<group>``."""
    head, dot, last = path.rpartition(".")
    words = _words_of(last)
    joiner = next((i for i, word in enumerate(words) if word in _INTO), 0)
    if joiner < 1 or joiner == len(words) - 1 or _GROUP_OF.get(stem(words[0])) not in _JOINING:
        return None
    for noun in _MEMBERSHIP_NOUNS:
        guess = guess_of(f"{head}{dot}{words[0]}_{'_'.join(words[joiner + 1 :])}_{noun}")
        if guess is not None and _reads_some(guess, segments):
            return guess
    return None


def _verb_nouns(
    verb: list[str], path: str, segments: list[Segment], allow: Callable[[Action], bool] | None
) -> list[tuple[float, str, Action]]:
    """For a guess opening with a verb of one change of state (``lock``, ``pin``, ``follow``) or its undoing
    (``unlock``): the operations making (deleting, for the undoing) a resource named by that verb and held
    by nothing the guess does not name, ranked ``_OWN_NOUN`` steps behind their depth, the ones whose URL
    also names its other words first. Empty for any other verb."""
    if not verb or not own_state_verb(verb[0]):
        return []
    noun, undo = (verb[0][2:], True) if verb[0].startswith("un") and own_state_verb(verb[0][2:]) else (verb[0], False)
    wanted = ("delete",) if undo else ("post", "put")
    rest = set(identifier_terms(path)) - {verb[0]}
    out: list[tuple[float, str, Action]] = []
    for segment in segments:
        for action, shape in zip(segment.actions, shapes_of(segment.actions), strict=True):
            method = str(getattr(action.binding, "method", "")).lower()
            if shape is None or shape.resource != {noun} or method not in wanted:
                continue
            if shape.holder and not rest & shape.words:
                continue  # a repository's merges are no merge of a pull request: the guess names no repository
            if allow is None or allow(action):
                out.append((shape.depth + _OWN_NOUN - len(rest & shape.words), action.qualified_name, action))
    return out


def _denominal(path: str, segments: list[Segment]) -> Guess | None:
    """A guess opening with a noun used as a verb, read as the creation of that noun under what it names,
    when some operation of ``segments`` is that: ``comment_on_issue`` and ``issues.comment`` ->
    ``POST /issues/{id}/comments``, ``label_issue`` -> ``POST /issues/{id}/labels``. None otherwise
    (``user_info`` names no user created under an info)."""
    _, dot, last = path.rpartition(".")
    words = _words_of(last)
    if not words or (dot and len(words) > 1):
        return None
    guess = guess_of(f"{path}.create" if dot else f"create_{last}")
    if guess is None or len(guess.resource) < 2:
        return None
    return guess if _reads_some(guess, segments, of=stem(words[0])) else None


def _reads_some(guess: Guess, segments: list[Segment], of: str = "") -> bool:
    """Whether ``guess`` matches some operation of ``segments`` (one acting on ``of``, when given)."""
    return any(
        shape is not None and (not of or of in shape.resource) and guess.matches(shape)
        for segment in segments
        for shape in shapes_of(segment.actions)
    )


_COMMANDS = {
    "ls": "list_files",
    "mkdir": "create_folder",
    "rmdir": "delete_folder",
    "rm": "delete_file",
    "mv": "move_file",
    "cp": "copy_file",
}
"""Shell commands an agent names a file operation by, and the verb and resource they mean."""


def _spelled_out(path: str) -> str:
    """A guess that is a shell command (``storage.mkdir``, ``ls``) as the verb and resource it means
    (``storage.create_folder``); a command followed by what it acts on (``rm_backup``) keeps that:
    ``delete_backup``. Any other guess as it is."""
    head, dot, last = path.rpartition(".")
    words = _WORDS.findall(last)
    spelled = _COMMANDS.get(words[0].lower()) if words else None
    if spelled is None:
        return path
    verb = spelled.split("_", 1)[0]
    return f"{head}{dot}{spelled if len(words) == 1 else '_'.join([verb, *words[1:]])}"


_JOINERS = frozenset({"to", "in", "on", "from", "for", "of", "via", "with"})
"""Words that join a product's name to the rest of a guess (``upload_file_to_dropbox``)."""


def _named_inside(index: DiscoveryIndex, path: str, visible: Collection[str]) -> tuple[list[Segment], str]:
    """A visible connector a guess without one names among its words (``get_salesloft_person``,
    ``upload_file_to_files_com``: one word or two run together), and the guess without them (and the word
    joining them to it); else no connector and ``path`` as it was. A name its own actions use as a word
    (a ``calendar`` connector's ``create_calendar_event``) is a resource there, not the product."""
    if "." in path:
        return [], path
    words = _WORDS.findall(path)
    for size in (1, 2):
        for start in range(len(words) - size + 1):
            folded = "".join(words[start : start + size]).lower()
            segments = [
                index._segments[slug]
                for slug in index._slugs_by_fold.get(folded, ())
                if slug in visible and not _path_uses(index._segments[slug], stem(folded))
            ]
            rest = words[:start] + words[start + size :]
            if start and start + size == len(words) and rest[-1].lower() in _JOINERS:
                rest = rest[:-1]
            if segments and len(rest) > 1:
                return segments, "_".join(word.lower() for word in rest)
    return [], path


def _path_uses(segment: Segment, term: str) -> bool:
    """Whether an action of ``segment`` has index term ``term`` in its name after the connector's."""
    return any(term in identifier_terms(action.path) for action in segment.actions)


def guess_as_query(name: str) -> str:
    """A guessed name as the words ``discover`` would be asked (``stripe.applyCoupon`` -> ``stripe apply
    coupon``): what its spelling does not find, its meaning may."""
    return " ".join(word.lower() for part in name.split(".") for word in _WORDS.findall(part))


def _unique_path(
    index: DiscoveryIndex, path: str, visible: list[Segment], allow: Callable[[Action], bool] | None
) -> Action | None:
    """The one visible action whose path (not qualified name) is ``path`` up to spelling, else None."""
    key = fold_name(path)
    found: list[Action] = []
    for segment in visible:
        hit = segment.by_folded.get(key)
        found.extend(segment.actions[p] for p in ((hit,) if isinstance(hit, int) else hit or ()))
    found = [action for action in found if allow is None or allow(action)]
    return found[0] if len(found) == 1 else None


def _names_use(segments: list[Segment], term: str) -> bool:
    """Whether an action name of one of ``segments`` uses index term ``term``."""
    return any(term in segment.name_terms for segment in segments)


def _words_of(path: str) -> list[str]:
    return [word.lower() for part in path.split(".") for word in _WORDS.findall(part)]


def _same_name(guessed: list[str], theirs: list[str]) -> bool:
    """Whether two names are one word for one word, up to a verb of the same group or a word's number
    (``fetch_accounts`` ~ ``get_accounts``, ``get_account_capabilitieses`` ~ ``get_account_capabilities``)."""
    if len(guessed) != len(theirs) or guessed == theirs:
        return False
    for mine, other in zip(guessed, theirs, strict=True):
        if mine == other or _number_of(mine) == _number_of(other):
            continue
        group = _GROUP_OF.get(stem(mine))
        if group is None or group != _GROUP_OF.get(stem(other)):
            return False
    return True


def _verb_first(path: str) -> list[str]:
    """A grouped name as a verb-first guess spells it: ``actions.list_workflow_runs`` ->
    ``list_action_workflow_runs`` (the group singular, after the verb)."""
    group, _, rest = path.partition(".")
    if not rest or "." in rest:
        return []
    words = _words_of(rest)
    return [*words[:1], *(_singular(word) for word in _words_of(group)), *words[1:]]


def _root_share(index: DiscoveryIndex, action: Action, shape: Shape, guessed: Collection[str]) -> float:
    """The share of its connector's operations under ``action``'s URL root (its ``shape``'s; see
    ``_rest_shape.root_shares``); all of it when the guess names that root (``admin_...`` for
    ``/admin.conversations.archive``)."""
    if shape.root <= set(guessed):
        return 1.0
    return root_shares(index._segments[action.connector].actions).get(shape.root, 0.0)


def _shape_in(index: DiscoveryIndex, action: Action) -> Shape | None:
    """``action``'s shape, read with its connector's (``_rest_shape.shapes_of``)."""
    segment = index._segments.get(action.connector)
    position = segment.by_path.get(action.path) if segment is not None else None
    return shapes_of(segment.actions)[position] if segment is not None and position is not None else None


def _holds_named(index: DiscoveryIndex, read: list[Action], resource: frozenset[str]) -> bool:
    """Whether an operation the guess's verb and resource ``read`` is a collection held under a member the
    guess names (``GET /issues/{id}/comments`` for ``get_issue_comments``)."""
    for action in read:
        shape = _shape_in(index, action)
        if shape is not None and not shape.member and shape.holder and shape.holder <= resource:
            return True
    return False


def _ungrouped(path: str) -> list[str]:
    """A grouped name's words after its group (``issues.add_labels`` -> add, labels); [] when ungrouped."""
    _, dot, rest = path.rpartition(".")
    return _words_of(rest) if dot else []


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _spelled_alike(guessed: list[str], theirs: list[str]) -> bool:
    """Whether a name is the guess up to a word's last ``s`` or a verb of its group (``send_messages``)."""
    trimmed = [word.rstrip("s") for word in guessed]
    return trimmed == [word.rstrip("s") for word in theirs] or _same_name(trimmed, [w.rstrip("s") for w in theirs])


def _number_of(word: str) -> str:
    """A word with any plural ending taken off (``capabilitieses`` -> ``capabiliti``, ``ids`` -> ``id``)."""
    for ending in ("ieses", "ies", "es", "s"):
        if word.endswith(ending) and len(word) > len(ending) + 1:
            return word[: -len(ending)] + ("i" if ending.startswith("ie") else "")
    return word[:-1] + "i" if word.endswith("y") else word


def _collapse(words: list[str]) -> list[str]:
    """``get_all_x`` / ``fetchAllX`` is how guesses spell ``list_x``."""
    out: list[str] = []
    for word in words:
        if word.lower() == "all" and out and stem(out[-1].lower()) in _READ_VERBS:
            out[-1] = "list"
        else:
            out.append(word)
    return out


def _overlap(guessed: list[str], words: list[str]) -> float:
    """Dice overlap of two word lists where a guessed word also matches its synonyms and verb group."""
    if not guessed or not words:
        return 0.0
    theirs = set(words)
    groups = {_GROUP_OF[word] for word in theirs if word in _GROUP_OF}
    matched = 0
    for term in dict.fromkeys(guessed):
        # Synonyms count as shared words too: "send_message" is what chat_post_message does.
        if term in theirs or _GROUP_OF.get(term, -1) in groups or not theirs.isdisjoint(SYNONYMS.get(term, ())):
            matched += 1
    return 2 * matched / (len(dict.fromkeys(guessed)) + len(theirs))


def _spelled(path: str) -> set[str]:
    """A name's words as spelled (lowercase, nothing stemmed)."""
    return {word.lower() for part in path.split(".") for word in _WORDS.findall(part)}
