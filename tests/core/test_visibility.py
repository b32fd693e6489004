"""``visibility``: the rules applied to one action under every name it has had (the server's
``Permissions`` and the command line's stored-state answers both decide through it)."""

from __future__ import annotations

from mcp_gateway.core import visibility
from mcp_gateway.manifest import ConnectorConfig, Manifest, parse_manifest
from mcp_gateway.vocabulary.model import Action, HttpBinding

MANIFEST = """
project: seen
default_mode: risk
policies:
  - {match: "api.old.remove", action: block}
connectors:
  - slug: api
    base_url: "http://127.0.0.1:9"
    policies:
      - {match: "legacy.wipe", action: require_approval}
      - {match: "items.get", action: block, when: {id: {eq: "0"}}}
"""


def _setup() -> tuple[Manifest, ConnectorConfig]:
    manifest = parse_manifest(MANIFEST)
    cfg = manifest.connector("api")
    assert cfg is not None
    return manifest, cfg


def _action(path: str, *aliases: str) -> Action:
    return Action(connector="api", path=path, aliases=aliases, risk="read", binding=HttpBinding(method="GET", url="/x"))


def test_a_rule_for_an_earlier_name_still_hides_the_action() -> None:
    manifest, cfg = _setup()
    assert visibility.hidden(manifest, cfg, _action("items.remove", "old.remove"))
    assert not visibility.hidden(manifest, cfg, _action("items.remove"))
    assert visibility.may_hide(manifest, cfg)


def test_the_strictest_verdict_of_its_names_decides() -> None:
    manifest, cfg = _setup()
    renamed = _action("items.wipe", "legacy.wipe")
    assert visibility.verdict(manifest, cfg, renamed, {}).action == "require_approval"
    assert visibility.verdict(manifest, cfg, _action("items.wipe"), {}).action == "always_run"  # a read, by risk
    assert visibility.verdict(manifest, cfg, _action("items.get"), {"id": "0"}).action == "block"
    assert visibility.conditional(manifest, cfg, _action("items.get"))
    assert not visibility.conditional(manifest, cfg, renamed)


def test_withheld_counts_by_why_most_first() -> None:
    manifest, cfg = _setup()
    actions = [_action("a.one", "old.remove"), _action("a.two"), _action("a.three"), _action("a.four")]
    held = {"api.a.two": "held for review (hides text)", "api.a.three": "held for review (hides text)"}
    counts = visibility.withheld(actions, lambda a: visibility.hidden(manifest, cfg, a), held.get)
    assert list(counts.items()) == [("held for review (hides text)", 2), (visibility.HIDDEN_BY_POLICY, 1)]


def test_a_condition_judges_the_default_of_an_argument_left_out() -> None:
    # The upstream applies its schema's default to an argument the agent leaves out (a Postman
    # request's is even sent by the gateway): the rule must see that value, not its absence.
    manifest, cfg = _setup()
    defaulted = Action(
        connector="api",
        path="items.get",
        risk="read",
        input_schema={"type": "object", "properties": {"id": {"type": "string", "default": "0"}}},
        binding=HttpBinding(method="GET", url="/items"),
    )
    assert visibility.verdict(manifest, cfg, defaulted, {}).action == "block"
    assert visibility.verdict(manifest, cfg, defaulted, {"id": "7"}).action == "always_run"
    assert visibility.judged_arguments(defaulted, {"id": "7"}) == {"id": "7"}
