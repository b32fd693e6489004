"""``addressed``: the path a generic request sends, as its rules judge it, and the curated actions
whose method and path template it reaches, with the arguments a direct call would have carried."""

from __future__ import annotations

import httpx2
import pytest

from mcp_gateway.core.addressed import addressed, request_path
from mcp_gateway.vocabulary.model import Action, HttpBinding, OpenAPIBinding, ParamSpec

BASE = "https://bank.example/api"


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://bank.example/api/admin/secrets", "/admin/secrets"),
        ("https://bank.example/api/./admin/./secrets", "/admin/secrets"),
        ("https://bank.example/api/%61dmin/secrets", "/admin/secrets"),
        ("https://bank.example/api/a%2Fb", "/a%2Fb"),  # a reserved character stays encoded
        ("https://bank.example/api", "/"),
        ("https://bank.example/other/x", "/other/x"),  # outside the base path: the whole path
        ("https://bank.example/api/items/?q=1", "/items/"),
    ],
)
def test_request_path_is_the_path_as_sent_below_the_base(url: str, path: str) -> None:
    assert request_path(httpx2.URL(url), BASE) == path


def _action(path: str, method: str, url: str, *params: ParamSpec, body_param: str | None = None) -> Action:
    return Action(
        connector="bank",
        path=path,
        binding=OpenAPIBinding(method=method, url=url, params=params, body_param=body_param),
    )


ACTIONS = [
    _action("items.get", "GET", "/items/{item_id}", ParamSpec(name="id", location="path", wire_name="item_id")),
    _action(
        "transfers.create",
        "POST",
        "/transfers",
        ParamSpec(name="amount", location="body"),
        ParamSpec(name="dry", location="query", wire_name="dry-run"),
    ),
    Action(connector="bank", path="purge", binding=HttpBinding(method="DELETE", url="/admin/purge")),
]


def _reached(method: str, url: str, **kwargs: object) -> dict[str, dict[str, object]]:
    request = httpx2.Request(method, url, **kwargs)  # type: ignore[arg-type]
    return {a.path: args for a, args in addressed(ACTIONS, request, request_path(request.url, BASE))}


def test_a_request_reaches_the_action_its_method_and_template_match_with_its_arguments() -> None:
    assert _reached("GET", f"{BASE}/items/42") == {"items.get": {"id": "42"}}
    assert _reached("POST", f"{BASE}/transfers?dry-run=1", json={"amount": 5000}) == {
        "transfers.create": {"dry": "1", "amount": 5000}
    }
    assert _reached("POST", f"{BASE}/items/42") == {}  # no POST there
    assert _reached("GET", f"{BASE}/items/42/more") == {}  # one segment per placeholder


@pytest.mark.parametrize(
    "url", [f"{BASE}/ADMIN/purge", f"{BASE}/admin//purge/", f"{BASE}/admin/purge;x=1", f"{BASE}/admin/%2570urge"]
)
def test_matching_leans_wide_since_a_wider_match_only_adds_a_stricter_verdict(url: str) -> None:
    assert list(_reached("DELETE", url)) == ["purge"]


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS"])
def test_head_and_options_reach_whatever_action_sits_at_the_path(method: str) -> None:
    assert list(_reached(method, f"{BASE}/admin/purge")) == ["purge"]
