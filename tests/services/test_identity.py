"""Grants by agent, narrowed by users and groups (``identity.granted_connectors``)."""

from __future__ import annotations

from mcp_gateway.manifest import parse_manifest
from mcp_gateway.services.identity import OPERATOR, Principal, granted_connectors

MANIFEST = """
connectors:
  - {slug: docs, base_url: "http://x.test", source: {http: {actions: [{path: a.b, method: GET, url: /}]}}}
  - {slug: ops, base_url: "http://x.test", source: {http: {actions: [{path: a.b, method: GET, url: /}]}}}
  - {slug: pay, base_url: "http://x.test", source: {http: {actions: [{path: a.b, method: GET, url: /}]}}}
agents:
  - {name: claude-code, connectors: [docs]}
  - {name: claude-code, users: [maria], connectors: [ops]}
  - {name: claude-code, groups: [finance], connectors: [pay]}
"""


def test_grants_can_name_users_and_groups() -> None:
    m = parse_manifest(MANIFEST)
    assert granted_connectors(m, Principal("maria", "claude-code")) == {"docs", "ops"}
    assert granted_connectors(m, Principal("bob", "claude-code", groups=("finance",))) == {"docs", "pay"}
    assert granted_connectors(m, Principal("eve", "claude-code")) == {"docs"}
    assert granted_connectors(m, Principal("maria", "other-agent")) == frozenset()
    assert granted_connectors(m, OPERATOR) == {"docs", "ops", "pay"}


def test_two_unrestricted_entries_for_one_agent_are_still_a_duplicate() -> None:
    import pytest

    from mcp_gateway.vocabulary.errors import ManifestError

    with pytest.raises(ManifestError, match="duplicate agent"):
        parse_manifest(MANIFEST + "  - {name: claude-code, connectors: [pay]}\n")


def test_front_door_in_the_manifest() -> None:
    m = parse_manifest("front_door: {issuer: 'https://idp.test', scopes: [mcp], agents_by_claim: {abc: bot}}\n")
    assert m.front_door is not None and m.front_door.static_tokens and m.front_door.user_claim == "sub"
    assert m.approvals.separate_approver is False


def test_front_door_urls_must_be_urls() -> None:
    import pytest

    from mcp_gateway.vocabulary.errors import ManifestError

    with pytest.raises(ManifestError, match="not an http"):
        parse_manifest("front_door: {issuer: 'login.example.com'}\n")


def test_front_door_key_and_introspection_urls_need_https_off_loopback() -> None:
    import pytest

    from mcp_gateway.vocabulary.errors import ManifestError

    for key in ("issuer", "jwks_url", "introspection_url"):
        other = "" if key == "issuer" else "issuer: 'https://login.example.com', "
        with pytest.raises(ManifestError, match=r"plain http on a host that is not loopback.*use the https URL"):
            parse_manifest(f"front_door: {{{other}{key}: 'http://login.example.com/x'}}\n")
    for url in ("https://login.example.com", "http://127.0.0.1:9/x", "http://[::1]:9/x", "http://localhost:9/x"):
        m = parse_manifest(f"front_door: {{issuer: '{url}', jwks_url: '{url}/jwks', introspection_url: '{url}/i'}}\n")
        assert m.front_door is not None and m.front_door.issuer == url


def test_separate_approver_per_policy_rule() -> None:
    import pytest

    from mcp_gateway.vocabulary.errors import ManifestError

    m = parse_manifest(
        "policies:\n  - {match: 'ops.*', action: require_approval, separate_approver: true}\n"
        "  - {match: 'docs.*', action: require_approval}\n"
    )
    assert [r.separate_approver for r in m.policies] == [True, False]
    with pytest.raises(ManifestError, match="separate_approver applies to require_approval rules"):
        parse_manifest("policies:\n  - {match: 'ops.*', action: block, separate_approver: true}\n")
