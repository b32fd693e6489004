"""How often a guessed tool name gets the intended action as its first suggestion (SPEC 3.2).

For every action of every API the benchmarks load (``bench_discover_data``: GitHub, Stripe, Slack,
Notion, Box, Wise, ... through the real normalizers; each API in its own index), its name is mangled the
ways models guess names, and ``DiscoveryIndex.suggest`` (what ``call`` and ``describe`` answer for
an unknown tool) must put the original action first. A mangled name that is itself a real action
(``issues.delete_label`` from ``issues.remove_label`` by synonym) is not a guess: it is skipped and
counted. Mangles (for ``github.issues.create_comment``):

- ``no_connector``: ``issues.create_comment``
- ``camelCase``: ``github.issues.createComment``
- ``one_segment``: ``github.issues_create_comment`` (dots turned into underscores)
- ``verb_first``: ``github.create_issue_comment`` (verb, singular resource, the rest)
- ``synonym_verb``: ``github.issues.add_comment`` (create/add, get/fetch, list/get_all, delete/remove,
  update/edit, remove/delete, add/create, set/update; actions with another verb are skipped)
- ``dotted_camel``: ``slack.chat.postMessage`` for ``slack.chat_post_message`` (one-segment paths)
- ``plural``: ``github.issue.create_comment`` (the resource's plural toggled; when it is not a
  plural, the last word of the operation is pluralized: ``git.create_blobs``)

- ``rest``: ``stripe.update_customer`` for ``POST /v1/customers/{customer}``, ``github.list_issues``
  for ``GET /issues``: the verb from the method and the last resource of the URL, as an agent that
  knows the API's shape but not its names writes it (``sources._naming.rest_path`` over the URL from
  its last resource on). Several operations share such a guess (``GET /issues``,
  ``GET /repos/{owner}/{repo}/issues``): the right one is the resource's own, the one with the fewest
  literal segments; a tie is skipped.
- ``rest_dotted``: ``stripe.customers.update``, ``github.issues.list``: the same, resource first.

Usage: python scripts/bench_guessed_names.py [--show 10]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.discovery import DiscoveryIndex  # noqa: E402
from mcp_gateway.sources._naming import rest_path, singular, snake_case  # noqa: E402
from mcp_gateway.vocabulary.model import Action, HttpBinding, OpenAPIBinding, PostmanBinding  # noqa: E402

VERB_SYNONYMS = {
    "create": "add",
    "get": "fetch",
    "list": "get_all",
    "delete": "remove",
    "update": "edit",
    "remove": "delete",
    "add": "create",
    "set": "update",
}


def _singular(word: str) -> str:
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _plural(word: str) -> str:
    if word.endswith("y") and not word.endswith(("ay", "ey", "oy", "uy")):
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.capitalize() for word in rest)


def mangles(action: Action) -> dict[str, str]:
    """The guessed spellings of one action's name, by kind (a kind that does not apply is left out)."""
    slug, parts = action.connector, action.path.split(".")
    group, op = (parts[0], "_".join(parts[1:])) if len(parts) > 1 else ("", parts[0])
    words = op.split("_")
    out = {"no_connector": action.path, "camelCase": f"{slug}.{'.'.join([*parts[:-1], _camel(parts[-1])])}"}
    if group:
        out["one_segment"] = f"{slug}.{group}_{op}"
        noun = _singular(group)
        rest = [word for word in words[1:] if _singular(word) != noun]
        out["verb_first"] = f"{slug}.{'_'.join([words[0], noun, *rest])}"
    if words[0] in VERB_SYNONYMS:
        swapped = "_".join([VERB_SYNONYMS[words[0]], *words[1:]])
        out["synonym_verb"] = f"{slug}.{group + '.' if group else ''}{swapped}"
    if not group and len(words) > 2:
        out["dotted_camel"] = f"{slug}.{words[0]}.{_camel('_'.join(words[1:]))}"  # slack.chat.postMessage
    if group and _singular(group) != group:
        out["plural"] = f"{slug}.{_singular(group)}.{op}"
    elif len(words) > 1:
        out["plural"] = f"{slug}.{group + '.' if group else ''}{'_'.join([*words[:-1], _plural(words[-1])])}"
    return out


_VERSION = ("api", "rest")


def _rest_guesses(action: Action) -> tuple[str, str, int] | None:
    """``(update_customer, customers.update, literal segments)`` for an HTTP action, else None."""
    binding = action.binding
    if not isinstance(binding, OpenAPIBinding | HttpBinding | PostmanBinding):
        return None
    # A one-word method after a dot (Slack's ``/conversations.archive``) is the verb segment it reads as.
    path = re.sub(r"(?<=[A-Za-z])\.([a-z]+)$", r"/\1", binding.url.split("?")[0])
    segments = [segment for segment in path.split("/") if segment]
    literal = [
        i
        for i, segment in enumerate(segments)
        if "{" not in segment
        and not segment.startswith(":")
        and snake_case(segment)
        and snake_case(segment) not in _VERSION
        and not (segment[0] in "vV" and segment[1:].isdigit())
    ]
    if not literal:
        return None
    start = literal[-1]
    if len(literal) > 1 and rest_path("POST", "/x/{id}/" + segments[start]).startswith(snake_case(segments[start])):
        start = literal[-2]  # /deployments/{id}/cancel: the resource is the segment before the verb
    tail = "/" + "/".join("{x}" if "{" in s or s.startswith(":") else s for s in segments[start:])
    short = rest_path(binding.method, tail)
    verb, _, resource = short.partition("_")
    if not resource:
        return None
    head, _, last = resource.rpartition("_")
    plural = resource if verb == "list" else (f"{head}_" if head else "") + _plural(singular(last))
    return short, f"{plural}.{verb}", len(literal)


def rest_mangles(actions: list[Action]) -> dict[str, dict[str, str]]:
    """Per action name, its ``rest`` and ``rest_dotted`` guesses, when it is the one they mean."""
    shapes = {action.qualified_name: _rest_guesses(action) for action in actions}
    out: dict[str, dict[str, str]] = {}
    for kind, position in (("rest", 0), ("rest_dotted", 1)):
        owners: dict[str, list[tuple[int, str]]] = {}
        for name, shape in shapes.items():
            if shape is not None:
                owners.setdefault(shape[position], []).append((shape[2], name))
        for guess, candidates in owners.items():
            candidates.sort()
            if len(candidates) > 1 and candidates[0][0] == candidates[1][0]:
                continue  # two operations as shallow: the guess does not say which
            name = candidates[0][1]
            out.setdefault(name, {})[kind] = f"{name.split('.', 1)[0]}.{guess}"
    return out


def evaluate(
    index: DiscoveryIndex,
    actions: list[Action],
    suggest: Callable[[str], list[Action]] | None = None,
    *,
    catalog: list[Action] | None = None,
) -> dict[str, dict[str, float]]:
    """Per mangle kind: cases, first-suggestion accuracy, top-3 accuracy, skipped, and the misses.

    ``actions`` are the ones guessed at (a sample of the index, or all of it); ``catalog`` is the
    whole API the index holds (default: ``actions``): which operation a REST-shaped guess means
    depends on every operation of the API, not only the sampled ones."""
    suggest = suggest or (lambda name: index.suggest(name, limit=3))
    stats: dict[str, dict[str, float]] = {}
    misses: dict[str, list[tuple[str, str, list[str]]]] = {}
    latencies: list[float] = []
    rest = rest_mangles(catalog if catalog is not None else actions)
    for action in actions:
        for kind, guess in {**mangles(action), **rest.get(action.qualified_name, {})}.items():
            row = stats.setdefault(kind, {"n": 0, "first": 0, "top3": 0, "skipped": 0})
            real = index.resolve(guess)
            if guess == action.qualified_name or (real is not None and real is not action):
                row["skipped"] += 1
                continue
            started = time.perf_counter()
            got = [found.qualified_name for found in suggest(guess)]
            latencies.append((time.perf_counter() - started) * 1000)
            row["n"] += 1
            row["first"] += got[:1] == [action.qualified_name]
            row["top3"] += action.qualified_name in got[:3]
            if got[:1] != [action.qualified_name]:
                misses.setdefault(kind, []).append((guess, action.qualified_name, got))
    total = {"n": 0, "first": 0, "top3": 0, "skipped": 0}
    for row in stats.values():
        for key in total:
            total[key] += row[key]
    stats["all"] = total
    stats["_latency"] = {"p50": statistics.median(latencies), "max": max(latencies)}
    evaluate.misses = misses  # type: ignore[attr-defined]
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--show", type=int, default=0, help="print this many misses per kind")
    parser.add_argument("--apis", help="comma-separated connector slugs (default: every API of bench_discover_data)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_discover_data import API_LOADERS, catalog

    slugs = args.apis.split(",") if args.apis else list(API_LOADERS)
    stats: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    misses: dict[str, list[tuple[str, str, list[str]]]] = {}
    count = 0
    for slug in slugs:
        actions = list(catalog(slug))
        count += len(actions)
        index = DiscoveryIndex()
        index.replace_connector(slug, actions)
        found = evaluate(index, actions)
        latency = found.pop("_latency")
        latencies.append(latency["p50"])
        for kind, row in found.items():
            total = stats.setdefault(kind, {"n": 0, "first": 0, "top3": 0, "skipped": 0})
            for key in total:
                total[key] += row[key]
        for kind, rows in evaluate.misses.items():  # type: ignore[attr-defined]
            misses.setdefault(kind, []).extend(rows)
    print(f"### Guessed names: {count:,} actions of {len(slugs)} APIs, suggest(limit=3)\n")
    print("| mangle | guesses | first suggestion right | in top 3 | skipped (a real name) |")
    print("|---|---|---|---|---|")
    for kind, row in stats.items():
        n = max(row["n"], 1)
        print(
            f"| {kind} | {int(row['n'])} | {100 * row['first'] / n:.1f} % | {100 * row['top3'] / n:.1f} % "
            f"| {int(row['skipped'])} |"
        )
    print(f"\nsuggest latency: p50 of the per-API medians {statistics.median(latencies):.2f} ms")
    for kind, rows in misses.items():
        for guess, want, got in rows[: args.show]:
            print(f"  MISS {kind}: {guess} want {want} got {got}")


if __name__ == "__main__":
    main()
