"""``credential_readiness``: whether a connector's calls could run, from which credential keys are
stored (the one decision behind ``connectors``' status and ``needs_auth``, on the server and in the
command line's stored-state answers)."""

from __future__ import annotations

import pytest

from mcp_gateway.core.credential_readiness import configured
from mcp_gateway.manifest import ConnectorConfig, parse_manifest
from mcp_gateway.primitives.secrets import OAUTH2_TOKEN_NAME, PROJECT_WIDE, CredentialKey

MANIFEST = """
project: ready
connectors:
  - {slug: open, base_url: "http://127.0.0.1:9", auth: {type: none}}
  - {slug: team, base_url: "http://127.0.0.1:9", auth: {type: bearer}}
  - {slug: mine, base_url: "http://127.0.0.1:9", auth: {type: bearer}, credentials: per_user}
  - slug: lent
    base_url: "http://127.0.0.1:9"
    auth: {type: oauth2, flow: client_credentials, token_url: "http://127.0.0.1:9/token"}
  - slug: code
    base_url: "http://127.0.0.1:9"
    auth: {type: oauth2, authorize_url: "http://127.0.0.1:9/a", token_url: "http://127.0.0.1:9/t"}
  - slug: code_mine
    base_url: "http://127.0.0.1:9"
    credentials: per_user
    auth: {type: oauth2, authorize_url: "http://127.0.0.1:9/a", token_url: "http://127.0.0.1:9/t"}
"""


def _cfg(slug: str) -> ConnectorConfig:
    cfg = parse_manifest(MANIFEST).connector(slug)
    assert cfg is not None
    return cfg


def _key(connector: str, principal: str = PROJECT_WIDE, name: str = "default") -> CredentialKey:
    return CredentialKey(connector=connector, principal=principal, name=name)


def test_a_connector_without_auth_is_always_ready() -> None:
    assert configured(_cfg("open"), [])
    assert configured(_cfg("open"), [], "alice")


def test_a_team_credential_serves_everyone_and_only_its_own_connector() -> None:
    assert not configured(_cfg("team"), [_key("other")])
    assert configured(_cfg("team"), [_key("team")], "alice")
    # shared: only the team's is carried; a personal one left from a per_user period is not
    assert not configured(_cfg("team"), [_key("team", "bob")], "alice")
    assert not configured(_cfg("team"), [_key("team", "alice")], "alice")


def test_per_user_wants_the_caller_s_own() -> None:
    mine = _cfg("mine")
    assert not configured(mine, [_key("mine")], "alice")  # the project-wide one is not hers
    assert not configured(mine, [_key("mine", "bob")], "alice")
    assert configured(mine, [_key("mine", "alice")], "alice")
    assert configured(mine, [_key("mine", "bob")])  # no principal asked: any stored one


@pytest.mark.parametrize(
    ("slug", "keys", "principal", "ready"),
    [
        ("lent", [], None, False),
        ("lent", [("*", "default")], None, True),  # client credentials: the client is enough
        ("code", [("*", "default")], None, False),  # the authorization code grant needs its token set
        ("code", [("*", "default"), ("*", OAUTH2_TOKEN_NAME)], "alice", True),
        ("code", [("*", OAUTH2_TOKEN_NAME)], None, False),  # a token set without the client
        ("code_mine", [("*", "default"), ("*", OAUTH2_TOKEN_NAME)], "alice", False),  # not her token set
        ("code_mine", [("*", "default"), ("alice", OAUTH2_TOKEN_NAME)], "alice", True),
        ("code_mine", [("*", "default"), ("bob", OAUTH2_TOKEN_NAME)], "alice", False),
        ("code_mine", [("*", "default"), ("*", OAUTH2_TOKEN_NAME)], PROJECT_WIDE, True),  # the project's own
        ("code_mine", [("*", "default"), ("bob", OAUTH2_TOKEN_NAME)], None, True),
    ],
)
def test_oauth2_wants_the_client_and_for_a_code_grant_a_token_set(
    slug: str, keys: list[tuple[str, str]], principal: str | None, ready: bool
) -> None:
    assert configured(_cfg(slug), [_key(slug, p, n) for p, n in keys], principal) is ready
