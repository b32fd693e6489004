"""What the rules decide for one action: whether agents may see it, and the verdict on a call.

An action answers to every name it has had (a rule written for a name it had in an earlier release
still applies to it). These functions are the one place that applies a manifest's rules to an
action: ``Permissions`` asks them for the loaded catalogs, and the command line's ``connectors`` and
``discover`` answered from the stored state (``cli/listing.py``, ``cli/stored_discover.py``) ask them
for the stored ones. They read the manifest and the connector's configuration, nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..manifest import ConnectorConfig, Manifest
from ..policy import effective_risk, evaluate, is_hidden, strictest
from ..vocabulary.model import Action, PostmanBinding, Verdict

__all__ = [
    "HIDDEN_BY_POLICY",
    "action_names",
    "conditional",
    "hidden",
    "judged_arguments",
    "may_hide",
    "verdict",
    "withheld",
]

HIDDEN_BY_POLICY = "hidden by policy"
"""Why ``connectors`` does not count an action a ``block`` rule hides."""


def action_names(action: Action) -> list[tuple[str, str]]:
    """The action's qualified name and path, then those of each name it had in an earlier release."""
    return [
        (action.qualified_name, action.path),
        *((f"{action.connector}.{alias}", alias) for alias in action.aliases),
    ]


def may_hide(manifest: Manifest, cfg: ConnectorConfig) -> bool:
    """Whether any rule could hide an action of ``cfg`` (only ``block`` rules hide): when none can,
    no action needs to be read to know that none is hidden."""
    return any(rule.action == "block" for rule in (*manifest.policies, *cfg.policies))


def hidden(manifest: Manifest, cfg: ConnectorConfig, action: Action) -> bool:
    """Whether a ``hide`` rule keeps the action out of connectors, discover and describe."""
    return any(
        is_hidden(qualified_name=name, path=path, project_rules=manifest.policies, connector_rules=cfg.policies)
        for name, path in action_names(action)
    )


def verdict(manifest: Manifest, cfg: ConnectorConfig, action: Action, args: Mapping[str, Any]) -> Verdict:
    """The rule that decides a call of the action with ``args``: of the verdicts under each of its
    names, the strictest, judged on ``judged_arguments``."""
    args = judged_arguments(action, args)
    return strictest(
        [
            evaluate(
                qualified_name=name,
                path=path,
                risk=effective_risk(action, args),
                args=args,
                project_rules=manifest.policies,
                connector_rules=cfg.policies,
                sensitive=cfg.sensitive,
                default_mode=manifest.default_mode,
            )
            for name, path in action_names(action)
        ]
    )


def judged_arguments(action: Action, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """The arguments rules judge a call by: the agent's, and for each one left out whose schema gives
    a ``default``, that default. The gateway sends a Postman request's own (``sent_arguments``), and
    any other upstream applies its default itself: either way it is the value the call acts on."""
    if isinstance(action.binding, PostmanBinding):
        # Imported here: the command line's stored listings judge actions without loading httpx.
        from ..execution.http_request import sent_arguments

        return sent_arguments(action, args)
    properties = action.input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return args
    filled = {
        name: schema["default"]
        for name, schema in properties.items()
        if name not in args and isinstance(schema, Mapping) and "default" in schema
    }
    return {**filled, **args} if filled else args


def conditional(manifest: Manifest, cfg: ConnectorConfig, action: Action) -> bool:
    """Whether a rule with ``when`` may change the verdict depending on the arguments."""
    return any(
        any(r.when and r.matcher.matches(name) for r in manifest.policies)
        or any(r.when and r.matcher.matches(path) for r in cfg.policies)
        for name, path in action_names(action)
    )


def withheld(
    actions: Iterable[Action], hides: Callable[[Action], bool], held_reason: Callable[[str], str | None]
) -> dict[str, int]:
    """How many of ``actions`` agents may not see, by why (``hidden by policy`` where ``hides``, else
    what ``held_reason`` says of a qualified name held for review), most first."""
    found: Counter[str] = Counter()
    for action in actions:
        why = HIDDEN_BY_POLICY if hides(action) else held_reason(action.qualified_name)
        if why is not None:
            found[why] += 1
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))
