"""Action-path spelling shared by every source: snake_case words, verb-first names, collision suffixes.

Names are what an agent guesses before it searches, so they are spelled the way one would write
them: an acronym is one word (``listRedirectURLs`` -> ``list_redirect_urls``, ``createM2MToken`` ->
``create_m2m_token``), and an operation nobody named is called by what it does to what
(``GET /deployments/{id}/builds`` -> ``list_deployment_builds``).
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "HTTP_METHODS",
    "MAX_NAME_CHARS",
    "legacy_rest_path",
    "plural",
    "rest_path",
    "restates_url",
    "rpc_spelling",
    "singular",
    "snake_case",
    "unique_name",
    "without_scaffolding",
]

# Words written in mixed case that are one word all the same: ``OAuth`` is not ``o_auth``.
_MIXED_CASE_WORDS = (
    "OAuth",
    "GraphQL",
    "OpenID",
    "OpenAPI",
    "GitHub",
    "GitLab",
    "YouTube",
    "LinkedIn",
    "PayPal",
    "iOS",
    "macOS",
    "iPhone",
    "iPad",
    "eSIM",
    "WiFi",
    "MySQL",
    "NoSQL",
    "PostgreSQL",
    "QoS",
    "OEmbed",
    "SignalR",
)
# The same words when an operationId is already split (GitHub's ``delete-impersonation-o-auth-token``).
_SPLIT_WORDS = {("o", "auth"): "oauth", ("o", "embed"): "oembed"}
# A verb written against a noun that opens with digits (``Get3dSecure``): two words, as ``get_3d_secure``.
_VERB_BEFORE_DIGITS = re.compile(r"^(get|list|create|update|delete|post|put|patch|set)([0-9]+[a-z]+)$")
_WORD = re.compile(
    "|".join(
        (
            rf"(?:{'|'.join(_MIXED_CASE_WORDS)})[0-9]*(?![a-z])",
            # An acronym, digits inside or after it, a lowercase plural ``s``: URLs, M2M, E2E, HTTP2, IDs.
            # It ends before the capital that starts the next word (``HTTPServer`` -> HTTP, Server).
            r"[A-Z][A-Z0-9]*[A-Z](?:s|[0-9]+)?(?![a-z])",
            r"[A-Z]?[a-z0-9]+",
            r"[A-Z]+(?![a-z])[0-9]*",
        )
    )
)
_RUN = re.compile(r"[A-Za-z0-9]+")


_APOSTROPHE = re.compile(r"(?<=[A-Za-z])['\u2019](?=[A-Za-z])")
"""An apostrophe inside a word (``user's``, ``don't``): the word stays whole, as one would type it."""


def snake_case(text: str, *, former: bool = False) -> str:
    """``getHTTPServer`` -> ``get_http_server``; ``listRedirectURLs`` -> ``list_redirect_urls``;
    ``getOAuthAccessToken`` -> ``get_oauth_access_token``; ``repos/get-content`` -> ``repos_get_content``;
    ``Get a file's lock`` -> ``get_a_files_lock``. ``former``: as the previous release spelled it
    (``get_a_file_s_lock``), to keep that name resolving as an alias."""
    if not former:
        text = _APOSTROPHE.sub("", text)
    words: list[str] = []
    for word in (word.lower() for run in _RUN.findall(text) for word in _WORD.findall(run)):
        if words and (joined := _SPLIT_WORDS.get((words[-1], word))):
            words[-1] = joined
        elif glued := _VERB_BEFORE_DIGITS.match(word):
            words += glued.groups()
        else:
            words.append(word)
    return "_".join(words)


MAX_NAME_CHARS = 120
"""The longest action path a source gives: an operationId of thousands of characters would fill every
answer that lists it (cut, and told apart from another cut the same way by a digest of the whole)."""


def unique_name(name: str, taken: set[str]) -> str:
    """``name`` (cut at ``MAX_NAME_CHARS``), or ``name_2``, ``name_3``… when taken; the result is added
    to ``taken``.

    Sources walk their documents in a stable order, so the same spec always gives the same suffixes.
    """
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME_CHARS - 9].rstrip('._')}_{digest}"
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


# -- names of operations nobody named --------------------------------------------------------

_TEMPLATE_VAR = re.compile(r"\{([^}]*)\}")
_VERSION = re.compile(r"^(v[0-9]+([._][0-9]+)*|v[0-9]+(alpha|beta)[0-9]*|api|rest)$")
# A bare number opening a URL is its version too (``/api/2/issue``, ``/1.0/programs``).
_NUMBER = re.compile(r"^[0-9]+(_[0-9]+)*$")

# A last path segment that is one of these is the operation's verb: ``POST /deployments/{id}/cancel``
# is ``cancel_deployment``.
_ACTION_VERBS = frozenset(
    """accept activate approve archive assign block cancel capture clone close confirm copy deactivate
    decline deploy disable dismiss download enable execute export finalize follow import invite lock merge
    move mute pause pin preview promote publish redeploy refresh refund reject rename reopen rerun reset
    resolve restart restore resume retry revoke rollback rotate run search send start stop subscribe
    suspend sync test transfer trigger unarchive unassign unblock unfollow unlock unmute unpin unpublish
    unstar unsubscribe unsuspend upload validate verify void""".split()
)
_METHOD_VERBS = {"post": "create", "put": "update", "patch": "update", "delete": "delete"}


_SAME_BOTH_WAYS = frozenset("series species news sms mms dns gps cms".split())
_NOT_PLURAL = frozenset("alias canvas".split())


def singular(word: str) -> str:
    """``builds`` -> ``build``, ``policies`` -> ``policy``, ``addresses`` -> ``address``; ``status``,
    ``series`` and ``sms`` stay."""
    if word in _SAME_BOTH_WAYS or word in _NOT_PLURAL:
        return word
    if word.endswith("aliases") or (word.endswith("uses") and len(word) > 5 and not word.endswith(("ouses", "auses"))):
        return word[:-2]  # statuses -> status, bonuses -> bonus
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# Nouns without a plural of their own: a list of furniture is ``list_furniture``.
_UNCOUNTED = frozenset(
    "data metadata info information media furniture equipment software hardware feedback news".split()
)


_ADJECTIVE = re.compile(r"(ing|ed|al|ic|ive|ous|ful|less|able|ible)$")


def plural(word: str) -> str:
    """``flow`` -> ``flows``, ``policy`` -> ``policies``, ``address`` -> ``addresses``; a word that is
    already plural, or has none (``data``, ``status``), stays."""
    if word in _UNCOUNTED or word in _SAME_BOTH_WAYS or singular(word) != word:
        return word
    if word.endswith("is") and len(word) > 4:
        return word[:-2] + "es"  # analysis -> analyses
    if word.endswith("y") and len(word) > 2 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "sh", "ch", "x", "z")):
        return word + "es"
    return word + "s"


def _singular_words(words: str) -> str:
    head, _, last = words.rpartition("_")
    return f"{head}_{singular(last)}" if head else singular(last)


def rest_path(method: str, url: str, *, collection: bool = False, former: bool = False) -> str:
    """The verb-first name of an operation without a name of its own, from its method and URL.

    ``GET /deployments/{id}/builds`` -> ``list_deployment_builds``, ``GET /deployments/{id}`` ->
    ``get_deployment``, ``POST /v1/pets`` -> ``create_pet``, ``DELETE /pets/{id}`` -> ``delete_pet``,
    ``POST /deployments/{id}/cancel`` -> ``cancel_deployment``, ``GET /status`` -> ``get_status``.
    A member segment (one followed by a ``{param}``) is singular; version segments are left out.

    ``collection``: the document also has ``url/{param}``, so a GET on ``url`` lists, even where the
    URL spells its noun singular (``GET /setup/flow`` -> ``list_setup_flows``, beside ``GET
    /setup/flow/{id}`` -> ``get_setup_flow``). ``former``: the name releases before these two rules
    gave (``list_2_issue_properties`` for ``/api/2/issue/{key}/properties``), kept as an alias.
    """
    method_name = _rpc_method(url)
    if method_name:
        # RPC methods are read with GET and called with POST; another method on one is its own operation.
        verb = _METHOD_VERBS.get(method.lower()) if method.lower() not in ("get", "post") else None
        return f"{verb}_{method_name}" if verb else method_name
    items: list[tuple[str, bool]] = []  # (snake_case literal, followed by a parameter)
    for segment in url.split("/"):
        literal = snake_case(_TEMPLATE_VAR.sub(" ", segment))
        if literal:
            items.append((literal, False))
        elif _TEMPLATE_VAR.search(segment) and items:
            items[-1] = (items[-1][0], True)
    if len(items) > 1 and any(not _VERSION.match(word) for word, _ in items):
        items = [item for item in items if not _VERSION.match(item[0])]
    while not former and len(items) > 1 and _NUMBER.match(items[0][0]):
        items.pop(0)
    collection = collection and not former
    verb_method = method.lower()
    verb = ""
    if len(items) > 1 and not items[-1][1] and items[-1][0] in _ACTION_VERBS:
        verb = items.pop()[0]
    last_is_member = bool(items) and items[-1][1]
    if not verb:
        if verb_method == "get":
            listed = items and not last_is_member and (collection or singular(items[-1][0]) != items[-1][0])
            verb = "list" if listed else "get"
        elif verb_method == "post" and last_is_member:
            verb = "update"
        else:
            verb = _METHOD_VERBS.get(verb_method, verb_method)
    words = [_singular_words(word) if member else word for word, member in items]
    if words and verb == "create" and not last_is_member:
        words[-1] = _singular_words(words[-1])  # POST /pets creates one pet
    elif words and verb == "list" and collection:
        head, _, last = words[-1].rpartition("_")
        # ``/teammates/pending`` already names its plural, and ``pending`` has none.
        if not any(singular(word) != word for word in head.split("_")) and not _ADJECTIVE.search(last):
            words[-1] = f"{head}_{plural(last)}" if head else plural(last)
    return "_".join([verb, *words])


HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})
"""The methods an OpenAPI path item may hold an operation under."""
_FILE_SUFFIXES = frozenset("json yaml yml xml csv txt html pdf png jpg zip gz md".split())


def _rpc_method(url: str) -> str:
    """The method's own name when ``url`` ends in an RPC-style method (``/api/v1/chat.postMessage``,
    ``/conversations.list``, ``/api/v1/livechat/inquiries.take``) rather than a resource: its words as
    written, after the literal segments before it but the version ones (``chat_post_message``,
    ``livechat_inquiries_take``), as the API's own documentation names it. Empty for a resource path or
    a file (``/openapi.json``)."""
    segments = [segment for segment in url.strip("/").split("/") if segment]
    last = segments[-1] if segments else ""
    if "." not in last or _TEMPLATE_VAR.search(last):
        return ""
    head, _, suffix = last.rpartition(".")
    if not head or (suffix.lower() in _FILE_SUFFIXES and "." not in head):
        return ""
    before = [snake_case(segment) for segment in segments[:-1] if not _TEMPLATE_VAR.search(segment)]
    return "_".join(word for word in [*before, snake_case(last)] if word and not _VERSION.match(word))


def rpc_spelling(method: str, url: str) -> str | None:
    """How an RPC-style method is written in its API's documentation, as a dotted action path
    (``/api/v1/chat.postMessage`` -> ``chat.post_message``), for a GET or POST on one: an agent that
    knows the API guesses it so. None for a resource path."""
    if method.lower() not in ("get", "post") or not _rpc_method(url):
        return None
    segments = [segment for segment in url.strip("/").split("/") if segment and not _TEMPLATE_VAR.search(segment)]
    parts = [snake_case(part) for segment in segments for part in segment.split(".")]
    return ".".join(part for part in parts if part and not _VERSION.match(part)) or None


def restates_url(operation_id: str, url: str) -> bool:
    """Whether an ``operationId`` only spells out its method and whole URL, version segments included
    (``post-api-v1-chat.delete`` for ``POST /api/v1/chat.delete``, ``get_api_v1_users_id`` for
    ``GET /api/v1/users/{id}``): generated, not chosen, and a poor name (``post_api_v1_chat_delete``).

    Only for a URL with a version or ``api`` segment, spelled out: ``getUsers`` for ``GET /users`` and
    ``PostCustomers`` for ``POST /v1/customers`` are names someone chose (or that agents and earlier
    releases already use). One extra word before or after the URL's words is allowed: the method, or a
    slip of it (``pos-api-v1-…``).
    """
    if not any(_VERSION.match(segment.lower()) for segment in url.split("/")):
        return False
    words = [word for word in snake_case(operation_id).split("_") if word]
    for spelled in (snake_case(url), snake_case(_TEMPLATE_VAR.sub(" ", url))):
        path = [word for word in spelled.split("_") if word]
        extra = len(words) - len(path)
        if path and 0 <= extra <= 1 and (words[extra:] == path or words[: len(path)] == path):
            return True
    return False


def without_scaffolding(operation_id: str, method: str, url: str) -> str:
    """A generated ``operationId`` less what its generator added around the operation's own words; any
    other as it is:

    - a ``By<Param>`` restating a path parameter: ``getBoardsByIdBoard`` for ``/boards/{idBoard}`` ->
      ``getBoards``;
    - Spring's ``Using<METHOD>`` ending: ``getUserUsingGET_1`` -> ``getUser``;
    - NestJS's ``<Name>Controller_`` opening: ``UsersController_findAll`` -> ``Users_findAll``;
    - FastAPI's URL-and-method ending: ``read_item_items__item_id__get`` for ``GET /items/{item_id}`` ->
      ``read_item``;
    - the method and the URL's version segments opening it: ``post-api-v1-im.close`` for
      ``/api/v1/dm.close`` -> ``im.close`` (``GET_api_keys`` for ``/api_keys`` keeps its ``api``).
    """
    verb = method.lower()
    by_params = _without_by_params(operation_id, url)
    if by_params != operation_id:
        return by_params
    spring = re.search(rf"(?<=[a-z0-9])Using{verb.upper()}(?:_[0-9]+)?$", operation_id)
    if spring:
        return operation_id[: spring.start()]
    nest = re.match(r"([A-Za-z0-9]+)Controller_(?=[A-Za-z])", operation_id)
    if nest:
        return f"{nest.group(1)}_{operation_id[nest.end() :]}"
    fastapi = "_" + re.sub(r"\W", "_", url.lstrip("/")) + "_" + verb
    if operation_id.endswith(fastapi) and len(operation_id) > len(fastapi):
        return operation_id[: -len(fastapi)]
    scaffolding = [segment.lower() for segment in url.split("/") if _VERSION.match(segment.lower())]
    opening = re.match(r"[A-Za-z]+[-_ ]", operation_id)
    if scaffolding and opening and opening.group()[:-1].lower() in HTTP_METHODS:
        rest = operation_id[opening.end() :]
        for segment in scaffolding:
            step = re.match(rf"{re.escape(segment)}[-_ ]", rest, re.IGNORECASE)
            if step is None:
                return operation_id
            rest = rest[step.end() :]
        return rest or operation_id
    return operation_id


def _without_by_params(operation_id: str, url: str) -> str:
    """A camelCase ``operationId`` less each ``By<Param>`` that restates a path parameter of its URL
    (Trello's ``updateCardsChecklistCheckItemStateByIdCardByIdChecklist`` for ``/cards/{idCard}/checklist/
    {idChecklist}/…/state``): generated, and no agent guesses it. One ``By`` of a plain parameter
    (``getProfileByUsername``, ``getRoleById``) or of anything else (``getPetById`` for ``{petId}``,
    ``listUsersByTeam``) is the name's own."""
    out, removed, generated = operation_id, 0, False
    for param in _TEMPLATE_VAR.findall(url):
        if param[:1].isalpha():
            out, n = re.subn(rf"By{re.escape(param[0].upper() + param[1:])}(?![a-z0-9])", "", out)
            removed += n
            generated = generated or bool(n and re.match(r"id[A-Z]", param))
    # One ``ById`` or ``ByUsername`` is a name someone chose; a chain of them, or Trello's ``idBoard``, is not.
    if (removed > 1 or generated) and re.search(r"[a-z][A-Z]", out):
        return out
    return operation_id


def legacy_rest_path(method: str, url: str) -> str:
    """The name earlier releases gave an operation without a name of its own, kept as an alias:
    the URL's literal segments, each ``{param}`` as ``by_<param>``, then the method
    (``GET /pet/{petId}`` -> ``pet.by_pet_id.get``)."""
    parts: list[str] = []
    for segment in url.split("/"):
        segment = _TEMPLATE_VAR.sub(lambda m: f" by_{snake_case(m.group(1))} ", segment)
        if part := snake_case(segment):
            parts.append(part)
    parts.append(method.lower())
    return ".".join(parts)
