"""Reading manifest YAML: the data, the line of every key and item, and duplicate keys as issues.

Locations are tuples of keys and indexes (``Loc``); ``dotted`` writes one as a YAML path
(``connectors[0].auth.type``) and ``line_for`` finds its line, or its nearest ancestor's.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..vocabulary.errors import Issue, ManifestError

__all__ = ["Loc", "dotted", "line_for", "read_yaml"]

Loc = tuple[str | int, ...]


def read_yaml(text: str, file: str) -> tuple[Any, dict[Loc, int], list[Issue]]:
    """Parse one YAML document: its data, the line of every key and item, and duplicate keys.

    With libyaml (PyYAML's C parser, much faster than the pure-Python one) when it is there; a document
    it refuses is read again by the Python parser, whose messages the hints in ``_YAML_HINTS`` are written for."""
    try:
        return _read(getattr(yaml, "CSafeLoader", yaml.SafeLoader), text, file)
    except yaml.YAMLError:
        pass
    except RecursionError:  # nested past what even the parser walks (``_too_deep`` says so first, in most cases)
        raise ManifestError([_too_deep_issue(file, None)]) from None
    try:
        return _read(yaml.SafeLoader, text, file)
    except yaml.reader.ReaderError as exc:
        raise ManifestError([_character_issue(exc, text, file)]) from None
    except yaml.YAMLError as exc:
        raise ManifestError([_yaml_issue(exc, file)]) from None
    except RecursionError:
        raise ManifestError([_too_deep_issue(file, None)]) from None


def _read(loader_class: Any, text: str, file: str) -> tuple[Any, dict[Loc, int], list[Issue]]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is not None and (deep := _too_deep(node)) is not None:
            raise ManifestError([_too_deep_issue(file, deep.start_mark.line + 1)])
        if node is not None and _copied(node) > MAX_COPIED:
            raise ManifestError(
                [
                    Issue(
                        file,
                        None,
                        "",
                        f"YAML aliases ('*name' repeating '&name') copy more than {MAX_COPIED:,} values into the "
                        "manifest, nested inside one another",
                        "write the repeated parts out, or repeat them with fewer aliases nested in one another",
                    )
                ]
            )
        duplicates = _duplicate_keys(node, file) if node is not None else []
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    lines: dict[Loc, int] = {}
    if node is not None:
        _collect_lines(node, (), lines, set())
    return data, lines, duplicates


MAX_COPIED = 100_000
"""Values YAML aliases may add to a manifest, each alias read as a copy of its anchor (every later walk,
validation included, sees the copies): a few lines of aliases nested in one another otherwise grow into
gigabytes. A manifest written out, however large, copies nothing."""
_STOP = 10 * MAX_COPIED


MAX_DEPTH = 200
"""Lists and mappings nested in one another, at most: the walks of a manifest (aliases sized, lines
collected, the document built, validated) recurse once a level, and past about a thousand levels ended
in "unexpected RecursionError". Real manifests, JSON schemas written inline included, nest a few dozen."""


def _too_deep_issue(file: str, line: int | None) -> Issue:
    return Issue(
        file,
        line,
        "",
        f"the manifest nests lists and mappings more than {MAX_DEPTH} levels deep" + (" here" if line else ""),
        "flatten this value: no manifest setting nests that deep",
    )


def _too_deep(root: yaml.Node) -> yaml.Node | None:
    """The first collection nested deeper than ``MAX_DEPTH``, found without recursion; None if none is."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen: set[int] = set()
    while stack:
        node, depth = stack.pop()
        if id(node) in seen or not isinstance(node, yaml.CollectionNode):
            continue
        if depth > MAX_DEPTH:
            return node
        seen.add(id(node))
        children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
        stack.extend((child, depth + 1) for child in children)
    return None


def _copied(node: yaml.Node) -> int:
    """How many values the aliases under ``node`` add once read as copies (above ``MAX_COPIED`` as soon as
    that is certain)."""
    sizes: dict[int, int] = {}
    return _expanded(node, sizes, set()) - len(sizes)


def _expanded(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """How many values ``node`` stands for with each alias counted as a copy; past ``_STOP`` (or for an
    alias inside itself) a number above it. Linear in the nodes written: each is sized once."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    if id(node) in open_:
        return _STOP + 1  # an anchor inside itself: endless once copied
    open_.add(id(node))
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            total += _expanded(item, sizes, open_)
            if total > _STOP:
                break
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            total += _expanded(key, sizes, open_) + _expanded(value, sizes, open_)
            if total > _STOP:
                break
    open_.discard(id(node))
    sizes[id(node)] = total
    return total


_YAML_HINTS = (
    ("'\\t'", "indent with spaces: YAML does not allow tabs"),
    ("block mapping start", "indent this key like the keys beside it"),
    ("<block end>", "indent this line like the lines beside it"),
    ("mapping values are not allowed", "quote a value that contains ': '"),
    ("another document", "remove the '---' line: a manifest is one document"),
    ("found undefined alias", "define the '&anchor' before using '*anchor'"),
    ("found unexpected end of stream", "close the quote or bracket opened earlier"),
    (
        "could not determine a constructor for the tag",
        "remove the tag: a manifest is plain YAML, tags such as !!python/object are not allowed",
    ),
)


def _character_issue(exc: yaml.reader.ReaderError, text: str, file: str) -> Issue:
    """A character YAML never allows (a NUL byte, another control character), at its line and column:
    the parser's own message names an offset in ``"<unicode string>"`` on a second line."""
    before = text[: exc.position]
    line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    return Issue(
        file,
        line,
        "",
        f"not valid YAML (column {column}): the character U+{code:04X}, which YAML does not allow",
        "remove it; a NUL byte often means the file was cut or written by something other than an editor",
    )


def _yaml_issue(exc: yaml.YAMLError, file: str) -> Issue:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    context, problem = getattr(exc, "context", None), getattr(exc, "problem", None)
    text = "; ".join(p for p in (context, problem) if p) or str(exc)
    where = f" (column {mark.column + 1})" if mark is not None else ""
    fix = next((hint for needle, hint in _YAML_HINTS if needle in text), "check the indentation and quoting here")
    return Issue(file, mark.line + 1 if mark is not None else None, "", f"not valid YAML{where}: {text}", fix)


def _collect_lines(node: yaml.Node, path: Loc, lines: dict[Loc, int], active: set[int]) -> None:
    if id(node) in active:  # an alias that contains itself
        return
    active.add(id(node))
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines[(*path, key.value)] = key.start_mark.line + 1
                _collect_lines(value, (*path, key.value), lines, active)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, (*path, i), lines, active)
    active.discard(id(node))


def _duplicate_keys(root: yaml.Node, file: str) -> list[Issue]:
    issues: list[Issue] = []
    stack: list[tuple[yaml.Node, Loc]] = [(root, ())]
    visited: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                line = key.start_mark.line + 1
                if key.value in first:
                    issues.append(
                        Issue(
                            file,
                            line,
                            dotted((*path, key.value)),
                            f"key {key.value!r} appears twice (first on line {first[key.value]})",
                            "merge the two into one; YAML would silently keep only the last",
                        )
                    )
                first.setdefault(key.value, line)
                stack.append((value, (*path, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
    return issues


def line_for(loc: Loc, lines: dict[Loc, int]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def dotted(loc: Loc) -> str:
    """A location as a YAML path: ``connectors[0].auth.type``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out
