"""Action-path spelling shared by every source: snake_case words, verb-first names, collision suffixes.

Names are what an agent guesses before it searches, so they are spelled the way one would write
them: an acronym is one word (``listRedirectURLs`` -> ``list_redirect_urls``, ``createM2MToken`` ->
``create_m2m_token``), and an operation nobody named is called by what it does to what
(``GET /deployments/{id}/builds`` -> ``list_deployment_builds``).
"""

from __future__ import annotations

import re

__all__ = ["legacy_rest_path", "rest_path", "singular", "snake_case", "unique_name"]

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
)
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


def snake_case(text: str) -> str:
    """``getHTTPServer`` -> ``get_http_server``; ``listRedirectURLs`` -> ``list_redirect_urls``;
    ``getOAuthAccessToken`` -> ``get_oauth_access_token``; ``repos/get-content`` -> ``repos_get_content``."""
    return "_".join(word.lower() for run in _RUN.findall(text) for word in _WORD.findall(run))


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``… when taken; the result is added to ``taken``.

    Sources walk their documents in a stable order, so the same spec always gives the same suffixes.
    """
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


# -- names of operations nobody named --------------------------------------------------------

_TEMPLATE_VAR = re.compile(r"\{([^}]*)\}")
_VERSION = re.compile(r"^(v[0-9]+([._][0-9]+)*|api|rest)$")

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


def singular(word: str) -> str:
    """``builds`` -> ``build``, ``policies`` -> ``policy``, ``addresses`` -> ``address``; ``status`` stays."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _singular_words(words: str) -> str:
    head, _, last = words.rpartition("_")
    return f"{head}_{singular(last)}" if head else singular(last)


def rest_path(method: str, url: str) -> str:
    """The verb-first name of an operation without a name of its own, from its method and URL.

    ``GET /deployments/{id}/builds`` -> ``list_deployment_builds``, ``GET /deployments/{id}`` ->
    ``get_deployment``, ``POST /v1/pets`` -> ``create_pet``, ``DELETE /pets/{id}`` -> ``delete_pet``,
    ``POST /deployments/{id}/cancel`` -> ``cancel_deployment``, ``GET /status`` -> ``get_status``.
    A member segment (one followed by a ``{param}``) is singular; version segments are left out.
    """
    items: list[tuple[str, bool]] = []  # (snake_case literal, followed by a parameter)
    for segment in url.split("/"):
        literal = snake_case(_TEMPLATE_VAR.sub(" ", segment))
        if literal:
            items.append((literal, False))
        elif _TEMPLATE_VAR.search(segment) and items:
            items[-1] = (items[-1][0], True)
    if len(items) > 1 and any(not _VERSION.match(word) for word, _ in items):
        items = [item for item in items if not _VERSION.match(item[0])]
    verb_method = method.lower()
    verb = ""
    if len(items) > 1 and not items[-1][1] and items[-1][0] in _ACTION_VERBS:
        verb = items.pop()[0]
    last_is_member = bool(items) and items[-1][1]
    if not verb:
        if verb_method == "get":
            verb = "list" if items and not last_is_member and singular(items[-1][0]) != items[-1][0] else "get"
        elif verb_method == "post" and last_is_member:
            verb = "update"
        else:
            verb = _METHOD_VERBS.get(verb_method, verb_method)
    words = [_singular_words(word) if member else word for word, member in items]
    if words and verb == "create" and not last_is_member:
        words[-1] = _singular_words(words[-1])  # POST /pets creates one pet
    return "_".join([verb, *words])


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
