"""Policy rules that match no action of the loaded catalogs, with the closest names there are; a
connector whose catalog did not load is not judged, and an action's older names count."""

from __future__ import annotations

from mcp_gateway.core.unmatched_rules import unmatched_rules
from mcp_gateway.manifest import parse_manifest
from tests.support.actions import catalog_action

MANIFEST = """
policies:
  - {match: 'githb.*', action: block}
  - {match: 'github.repos.delete', action: block}
  - {match: 'github.old_name', action: require_approval}
  - {match: 'stripe.charges.*', action: block}
  - {match: '*.admin.*', action: block}
  - {match: '/^(/x', action: block}
connectors:
  - slug: github
    base_url: https://api.github.example
    policies:
      - {match: 'repos.remove', action: block}
      - {match: 'issues.*', action: require_approval}
    source: {http: {actions: [{path: issues.create, method: POST, url: /issues}]}}
  - slug: stripe
    base_url: https://api.stripe.example
    source: {http: {actions: [{path: charges.create, method: POST, url: /charges}]}}
"""


def test_rules_matching_nothing_loaded_are_named_with_the_closest_names() -> None:
    manifest = parse_manifest(MANIFEST)
    renamed = catalog_action("github", "issues.create").model_copy(update={"aliases": ("old_name",)})
    loaded = {"github": [renamed, catalog_action("github", "repos.get")]}  # stripe did not load
    found = {(u.where, u.rule.match): u.closest for u in unmatched_rules(manifest, loaded)}
    assert set(found) == {
        ("policies[0]", "githb.*"),
        ("policies[1]", "github.repos.delete"),
        ("connectors[github].policies[0]", "repos.remove"),
    }  # 'stripe.charges.*' and '*.admin.*' may be aimed at stripe; an unusable regex is validate's to report
    assert found[("policies[0]", "githb.*")][0] == "github.*"
    assert found[("policies[1]", "github.repos.delete")][0] == "github.repos.get"
    assert found[("connectors[github].policies[0]", "repos.remove")][0] == "repos.get"
    everything = {"github": loaded["github"], "stripe": [catalog_action("stripe", "charges.create")]}
    found = {(u.where, u.rule.match): u.closest for u in unmatched_rules(manifest, everything)}
    assert ("policies[4]", "*.admin.*") in found and ("policies[3]", "stripe.charges.*") not in found
