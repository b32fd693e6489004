"""Hand-declared HTTP actions (manifest ``source: {http: {actions: [...]}}``) as catalog actions.

Placement of an argument, unless the action's ``params`` says otherwise: a name that appears as
``{name}`` in the URL template goes to the path; the rest go to the JSON body when the method
allows one, else to the query string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..manifest import ConnectorConfig, HttpActionConfig
from ..vocabulary.errors import SourceError
from ..vocabulary.model import Action, HttpBinding, ParamLocation, ParamSpec, Risk, risk_of_method
from ._fingerprint import settings_digest
from .base import LoadContext, Normalized

__all__ = ["HttpLoader", "normalize_http_actions"]

_TEMPLATE_VAR = re.compile(r"{([^{}/]+)}")
_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
_PATH_RE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")


def _action(connector: str, cfg: HttpActionConfig, risk_overrides: Mapping[str, Risk]) -> Action:
    if not _PATH_RE.match(cfg.path):
        raise SourceError(
            f"http action path {cfg.path!r} must be lowercase words joined by dots (e.g. 'deploys.create')"
        )
    schema = dict(cfg.input_schema)
    properties: dict[str, object] = dict(schema.get("properties") or {})
    templated = _TEMPLATE_VAR.findall(cfg.url)
    for var in templated:
        properties.setdefault(var, {"type": "string"})
    required = list(dict.fromkeys([*(schema.get("required") or []), *templated]))
    schema.update({"type": "object", "properties": properties, "required": required})
    default_location: ParamLocation = "query" if cfg.method in _BODYLESS else "body"
    params = tuple(
        ParamSpec(name=name, location=cfg.params.get(name) or ("path" if name in templated else default_location))
        for name in properties
    )
    has_body = any(p.location == "body" for p in params)
    return Action(
        connector=connector,
        path=cfg.path,
        summary=cfg.summary or f"{cfg.method} {cfg.url}",
        description=cfg.description,
        input_schema=schema,
        risk=risk_overrides.get(cfg.path) or cfg.risk or risk_of_method(cfg.method),
        binding=HttpBinding(method=cfg.method, url=cfg.url, params=params, body="json" if has_body else "none"),
    )


def normalize_http_actions(
    connector: str, actions: Sequence[HttpActionConfig], risk_overrides: Mapping[str, Risk] | None = None
) -> list[Action]:
    seen: set[str] = set()
    out = []
    for cfg in actions:
        if cfg.path in seen:
            raise SourceError(f"http action path {cfg.path!r} is declared twice; give each action its own path")
        seen.add(cfg.path)
        out.append(_action(connector, cfg, risk_overrides or {}))
    return out


@dataclass(frozen=True)
class HttpLoader:
    """``source: {http: {actions: [...]}}`` as a ``Source``: the actions are in the manifest, so the
    connector's settings are the whole fingerprint."""

    actions: Sequence[HttpActionConfig]

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        return Normalized(normalize_http_actions(cfg.slug, self.actions, cfg.risk), None, settings_digest(cfg), [])
