"""One closed vocabulary of auth kinds (``model.AuthKind``): every manifest ``auth:`` model is one kind,
every kind has one model, and every other list of kinds names only kinds of it."""

from __future__ import annotations

from typing import get_args

from pydantic import BaseModel

from mcp_gateway.auth import BODY_SIGNING_KINDS
from mcp_gateway.manifest import AUTH_TYPES, AuthConfig
from mcp_gateway.primitives.secrets import SECRET_SHAPES
from mcp_gateway.vocabulary.model import AUTH_KINDS, AuthKind


def _model_kinds() -> list[str]:
    union, _field = get_args(AuthConfig)
    models: tuple[type[BaseModel], ...] = get_args(union)
    return [kind for model in models for kind in get_args(model.model_fields["type"].annotation)]


def test_every_auth_model_is_one_kind_and_every_kind_has_a_model() -> None:
    kinds = _model_kinds()
    assert sorted(kinds) == sorted(get_args(AuthKind)) == sorted(AUTH_KINDS)
    assert len(kinds) == len(set(kinds))


def test_every_list_of_kinds_names_only_kinds() -> None:
    assert sorted(AUTH_TYPES) == sorted(AUTH_KINDS)
    assert BODY_SIGNING_KINDS <= set(AUTH_KINDS)
    assert set(SECRET_SHAPES) <= set(AUTH_KINDS)
