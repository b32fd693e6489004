"""Policy rules that match no action of the synced catalogs: a typo (``githb.*``) or an action an
upstream removed leaves a rule that silently does nothing, and for a ``block`` rule that is a hole.

Pure: the manifest and each loaded connector's actions in, each such rule out with where it is written
and the closest names that exist (``difflib``). A connector whose catalog did not load is not judged
(its actions are unknown), nor is a project rule that could be aimed at it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..manifest import Manifest, PolicyRule
from ..vocabulary.model import Action
from .visibility import action_names

__all__ = ["UnmatchedRule", "unmatched_rules"]


@dataclass(frozen=True)
class UnmatchedRule:
    """A rule no action's name matches: ``where`` it is written, and the ``closest`` names there are."""

    where: str
    rule: PolicyRule
    closest: tuple[str, ...]


def unmatched_rules(manifest: Manifest, loaded: Mapping[str, Sequence[Action]]) -> list[UnmatchedRule]:
    """The rules of ``manifest`` (project-wide, then each connector's) that match no name of the actions
    in ``loaded`` (slug -> actions, the connectors whose catalog loaded), nor any of their older names."""
    unloaded = [c.slug for c in manifest.connectors if c.slug not in loaded]
    qualified = [name for actions in loaded.values() for action in actions for name, _ in action_names(action)]
    out: list[UnmatchedRule] = []
    for i, rule in enumerate(manifest.policies):
        if rule.matcher.error or any(rule.matcher.matches(name) for name in qualified):
            continue
        if _maybe_for(rule, unloaded):
            continue
        out.append(UnmatchedRule(f"policies[{i}]", rule, _closest(rule.match, qualified)))
    for cfg in manifest.connectors:
        if cfg.slug not in loaded:
            continue
        paths = [path for action in loaded[cfg.slug] for _, path in action_names(action)]
        for j, rule in enumerate(cfg.policies):
            if rule.matcher.error or any(rule.matcher.matches(path) for path in paths):
                continue
            out.append(UnmatchedRule(f"connectors[{cfg.slug}].policies[{j}]", rule, _closest(rule.match, paths)))
    return out


def _maybe_for(rule: PolicyRule, unloaded: Sequence[str]) -> bool:
    """Whether ``rule`` may be aimed at a connector whose actions are unknown: its pattern starts with
    that slug, with a wildcard, or is a regex."""
    return bool(unloaded) and (
        rule.match[:1] in ("*", "?", "[", "/") or any(rule.match.startswith(f"{slug}.") for slug in unloaded)
    )


def _closest(pattern: str, names: Sequence[str]) -> tuple[str, ...]:
    """The names most like ``pattern``; for a glob, the globs over their leading segments too
    (``ecoh.items.*`` -> ``echo.items.*``)."""
    candidates = set(names)
    if "*" in pattern:
        for name in names:
            parts = name.split(".")
            candidates.update(".".join(parts[:n]) + ".*" for n in range(1, len(parts)))
    return tuple(difflib.get_close_matches(pattern, sorted(candidates), n=3, cutoff=0.5))
