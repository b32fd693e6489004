"""build_request: every placement, escaping that keeps values from re-routing, body encodings."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, unquote

import httpx2
import pytest

from mcp_gateway.execution import build_request
from mcp_gateway.execution import http_request as request_module
from mcp_gateway.execution.http_request import DEFAULT_ACCEPT, USER_AGENT
from mcp_gateway.vocabulary.errors import MAX_ARGUMENT_ERRORS, ArgumentError, UpstreamError
from mcp_gateway.vocabulary.model import (
    Action,
    HttpBinding,
    OpenAPIBinding,
    ParamLocation,
    ParamSpec,
    PostmanBinding,
)

BASE = "https://api.example.com/v3"


def action(
    url: str = "/repos/{owner}/{repo}",
    method: str = "POST",
    params: dict[str, ParamLocation] | None = None,
    *,
    specs: tuple[ParamSpec, ...] = (),
    body: str = "json",
    body_param: str | None = None,
) -> Action:
    all_specs = specs + tuple(ParamSpec(name=n, location=loc) for n, loc in (params or {}).items())
    binding = OpenAPIBinding(method=method, url=url, params=all_specs, body=body, body_param=body_param)  # type: ignore[arg-type]
    return Action(connector="gh", path="repos.thing", binding=binding)


PATHS: dict[str, ParamLocation] = {"owner": "path", "repo": "path"}


def path_of(request: Any) -> str:
    return request.url.raw_path.decode().partition("?")[0]


# -- path ------------------------------------------------------------------------------------


def test_base_url_prefix_is_kept_and_values_fill_the_template() -> None:
    request = build_request(action(params=PATHS), {"owner": "octo", "repo": "hello"}, base_url=BASE)
    assert str(request.url) == "https://api.example.com/v3/repos/octo/hello"
    assert request.method == "POST"


@pytest.mark.parametrize("base", ["https://api.example.com/v3/", "https://api.example.com/v3"])
def test_base_url_trailing_slash_does_not_double(base: str) -> None:
    request = build_request(action(params=PATHS), {"owner": "a", "repo": "b"}, base_url=base)
    assert path_of(request) == "/v3/repos/a/b"


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("a/b", "a%2Fb"),
        ("v1.2..3/x", "v1.2..3%2Fx"),
        ("x?admin=1#frag", "x%3Fadmin%3D1%23frag"),
        ("with space", "with%20space"),
        ("naïve-日本", "na%C3%AFve-%E6%97%A5%E6%9C%AC"),
        ("100%", "100%25"),
        ("%2ex", "%252ex"),
    ],
)
def test_path_values_are_one_opaque_segment(value: str, encoded: str) -> None:
    request = build_request(action(params=PATHS), {"owner": value, "repo": "r"}, base_url=BASE)
    assert path_of(request) == f"/v3/repos/{encoded}/r"
    assert request.url.query == b""
    assert unquote(encoded) == value


@pytest.mark.parametrize(
    "value",
    [
        ".",
        "..",
        "",
        "../../admin",
        "a/../../admin",
        "./admin",
        "..\\admin",
        "%2e%2e",
        "%2E%2e%2fadmin",
        ".%2E/x",
        "%252e%252e",
        "..;/admin",
        "\uff0e\uff0e",  # full-width dots
        "%c0%ae%c0%ae",  # overlong UTF-8 dots
        ["ok", "../admin"],
    ],
)
def test_dot_segments_in_any_spelling_and_empty_path_values_are_refused(value: Any) -> None:
    with pytest.raises(ArgumentError) as info:
        build_request(action(params=PATHS), {"owner": value, "repo": "r"}, base_url=BASE)
    assert info.value.errors[0]["field"] == "owner"
    assert "owner" in str(info.value)


def test_a_traversing_path_value_says_why_it_is_refused() -> None:
    with pytest.raises(ArgumentError, match=r"cannot hold '\.' or '\.\.' path segments .* another endpoint"):
        build_request(action(params=PATHS), {"owner": "../../admin", "repo": "r"}, base_url=BASE)


def test_missing_path_value_names_the_argument_not_the_wire_name() -> None:
    spec = ParamSpec(name="owner_login", location="path", wire_name="owner")
    with pytest.raises(ArgumentError, match="owner_login"):
        build_request(action(specs=(spec,), params={"repo": "path"}), {"repo": "r"}, base_url=BASE)


def test_wire_name_fills_its_placeholder_and_path_arrays_are_comma_joined() -> None:
    spec = ParamSpec(name="owner_login", location="path", wire_name="owner")
    act = action(specs=(spec,), params={"repo": "path"})
    request = build_request(act, {"owner_login": "me", "repo": ["a/b", "c"]}, base_url=BASE)
    assert path_of(request) == "/v3/repos/me/a%2Fb,c"


def test_template_placeholder_without_a_param_spec_is_a_path_argument() -> None:
    act = Action(connector="i", path="deploys.create", binding=HttpBinding(method="POST", url="/deploys/{service}"))
    request = build_request(act, {"service": "web/api"}, base_url="http://127.0.0.1:9000")
    assert str(request.url) == "http://127.0.0.1:9000/deploys/web%2Fapi"


# -- query -----------------------------------------------------------------------------------


def test_query_encoding_of_scalars_arrays_objects_and_nulls() -> None:
    specs = (
        ParamSpec(name="labels", location="query"),
        ParamSpec(name="ids", location="query", style_explode=False),
        ParamSpec(name="state", location="query"),
        ParamSpec(name="draft", location="query"),
        ParamSpec(name="page", location="query"),
        ParamSpec(name="filter", location="query"),
        ParamSpec(name="since", location="query"),
        ParamSpec(name="q", location="query", wire_name="search q"),
    )
    args = {
        "labels": ["bug", "help wanted"],
        "ids": [1, 2, 3],
        "state": "open&admin=1",
        "draft": False,
        "page": 2,
        "filter": {"a": 1},
        "since": None,
        "q": "é",
    }
    request = build_request(action("/issues", "GET", specs=specs), args, base_url=BASE)
    query = request.url.query.decode()
    assert "ids=1,2,3" in query  # literal commas for explode=false
    assert parse_qsl(query) == [
        ("labels", "bug"),
        ("labels", "help wanted"),
        ("ids", "1,2,3"),
        ("state", "open&admin=1"),
        ("draft", "false"),
        ("page", "2"),
        ("filter", '{"a":1}'),
        ("search q", "é"),
    ]


def test_base_and_template_query_strings_are_kept_before_the_arguments() -> None:
    act = action("/search?type=repo", "GET", {"q": "query"})
    request = build_request(act, {"q": "x"}, base_url="https://h/api?api-version=2")
    assert request.url.query == b"api-version=2&type=repo&q=x"
    assert path_of(request) == "/api/search"


def _free_form(method: str = "GET") -> Action:
    """``GET /list?flt[...]&limit``: ``flt`` an exploded form object whose keys go on the wire as they are."""
    specs = (
        ParamSpec(name="flt", location="query", style="form", style_explode=True),
        ParamSpec(name="limit", location="query"),
        ParamSpec(name="page_size", location="query", wire_name="pageSize"),
    )
    return action("/list?mode=all", method, specs=specs)


def test_an_exploded_objects_own_keys_go_on_the_wire() -> None:
    request = build_request(_free_form(), {"flt": {"color": "red"}, "limit": 5}, base_url=BASE)
    assert request.url.query == b"mode=all&color=red&limit=5"


@pytest.mark.parametrize(
    ("key", "told"),
    [
        ("limit", "pass it as 'limit'"),
        ("LIMIT", "pass it as 'limit'"),
        ("limit[]", "pass it as 'limit'"),
        ("pageSize", "pass it as 'page_size'"),
        ("mode", "the action's URL sets 'mode' itself"),
        ("api-version", "the action's URL sets 'api-version' itself"),
        ("_method", "read it as the request's method"),
        ("X-HTTP-Method-Override", "read it as the request's method"),
    ],
)
def test_an_exploded_object_cannot_write_another_parameter_or_the_method(key: str, told: str) -> None:
    # A rule on `limit` judges the `limit` argument; `limit` through `flt` would reach the wire unjudged.
    for args in ({"flt": {key: "9999"}}, {"flt": {key: "9999"}, "limit": 5}):
        with pytest.raises(ArgumentError, match=re.escape(told)) as caught:
            build_request(_free_form(), args, base_url=f"{BASE}?api-version=2")
        assert caught.value.errors == [{"field": f"flt.{key}", "message": caught.value.errors[0]["message"]}]


def test_two_exploded_objects_cannot_both_write_one_key() -> None:
    specs = tuple(ParamSpec(name=n, location="query", style="form") for n in ("a", "b"))
    with pytest.raises(ArgumentError, match="both hold the key 'x'"):
        build_request(action("/l", "GET", specs=specs), {"a": {"x": 1}, "b": {"x": 2}}, base_url=BASE)


def test_deep_objects_keep_their_keys_under_their_own_name() -> None:
    specs = (ParamSpec(name="f", location="query", style="deepObject"), ParamSpec(name="limit", location="query"))
    request = build_request(action("/l", "GET", specs=specs), {"f": {"limit": 1, "_method": "x"}}, base_url=BASE)
    assert request.url.query == b"f[limit]=1&f[_method]=x"


@pytest.mark.parametrize("body", ["form", "multipart"])
def test_a_free_form_form_body_cannot_write_the_method_or_a_query_parameter(body: str) -> None:
    specs = (ParamSpec(name="limit", location="query"), ParamSpec(name="payload", location="body"))
    act = action("/v1/x", specs=specs, body=body, body_param="payload")
    for key, told in (("_method", "the request's method"), ("limit", "pass it as 'limit'")):
        with pytest.raises(ArgumentError, match=re.escape(told)):
            build_request(act, {"payload": {key: "DELETE"}}, base_url=BASE)
    assert b"name" in build_request(act, {"payload": {"name": "x"}}, base_url=BASE).content


def test_a_free_form_json_body_cannot_write_the_method_unless_its_schema_declares_it() -> None:
    # Laravel merges a JSON body into the input: `_method` there would make this POST a DELETE.
    act = action("/v1/x", specs=(ParamSpec(name="body", location="body"),), body="json", body_param="body")
    for key in ("_method", "X-HTTP-Method-Override", "_method[]"):
        with pytest.raises(ArgumentError, match=re.escape("servers read it as the request's method")) as caught:
            build_request(act, {"body": {"name": "x", key: "DELETE"}}, base_url=BASE)
        assert caught.value.errors == [{"field": f"body.{key}", "message": "read as the method"}]
    nested = build_request(act, {"body": {"data": {"_method": "x"}}}, base_url=BASE)
    assert json.loads(nested.content) == {"data": {"_method": "x"}}
    schema = {"type": "object", "properties": {"body": {"anyOf": [{"properties": {"_method": {"type": "string"}}}]}}}
    declared = act.model_copy(update={"input_schema": schema})
    sent = build_request(declared, {"body": {"_method": "PATCH"}}, base_url=BASE)
    assert json.loads(sent.content) == {"_method": "PATCH"}


# -- headers and cookies ---------------------------------------------------------------------


def test_default_headers_static_headers_and_argument_headers_in_that_order() -> None:
    specs = (
        ParamSpec(name="request_id", location="header", wire_name="X-Request-Id"),
        ParamSpec(name="api_version", location="header", wire_name="X-GitHub-Api-Version"),
        ParamSpec(name="tags", location="header", wire_name="X-Tags"),
    )
    static = {"X-GitHub-Api-Version": "2022-11-28", "Accept": "application/vnd.github+json"}
    args = {"request_id": "r-1", "api_version": "2026-03-10", "tags": ["a", "b"]}
    request = build_request(action("/x", "GET", specs=specs), args, base_url=BASE, static_headers=static)
    assert request.headers["User-Agent"] == USER_AGENT
    assert USER_AGENT.startswith("mcp-gateway/")
    assert request.headers["Accept"] == "application/vnd.github+json"
    assert request.headers["X-GitHub-Api-Version"] == "2026-03-10"  # the agent's argument wins
    assert request.headers["X-Request-Id"] == "r-1"
    assert request.headers["X-Tags"] == "a, b"


def test_accept_default_when_nothing_sets_it() -> None:
    request = build_request(action("/x", "GET"), {}, base_url=BASE)
    assert request.headers["Accept"] == DEFAULT_ACCEPT
    assert request.content == b""
    assert "content-type" not in request.headers


@pytest.mark.parametrize("value", ["a\r\nX-Admin: 1", "a\nb", "a\rb", "a\0b"])
def test_header_values_with_line_breaks_are_refused(value: str) -> None:
    act = action("/x", "GET", specs=(ParamSpec(name="rid", location="header", wire_name="X-Request-Id"),))
    with pytest.raises(ArgumentError) as info:
        build_request(act, {"rid": value}, base_url=BASE)
    assert value not in str(info.value)
    assert info.value.errors == [{"field": "rid", "message": "contains CR, LF or NUL"}]


def test_framing_headers_cannot_be_set_by_arguments() -> None:
    act = action("/x", "GET", specs=(ParamSpec(name="h", location="header", wire_name="Host"),))
    with pytest.raises(ArgumentError, match="Host"):
        build_request(act, {"h": "evil.example"}, base_url=BASE)


@pytest.mark.parametrize(
    "header",
    [
        "X-HTTP-Method-Override",
        "x-http-method",
        "X-Method-Override",
        "X-Original-URL",
        "X-Rewrite-URL",
        "X-Forwarded-For",
        "X-Forwarded-Host",
        "x-forwarded-proto",
        "Forwarded",
    ],
)
def test_method_and_url_override_headers_cannot_be_set_by_arguments(header: str) -> None:
    act = action("/x", "GET", specs=(ParamSpec(name="h", location="header", wire_name=header),))
    with pytest.raises(ArgumentError, match=f"cannot set {header}: .*another method, URL or client") as info:
        build_request(act, {"h": "DELETE"}, base_url=BASE)
    assert info.value.errors == [{"field": "h", "message": "method, URL or client override header"}]
    assert (
        "x-request-id"
        in build_request(
            action("/x", "GET", specs=(ParamSpec(name="h", location="header", wire_name="X-Request-Id"),)),
            {"h": "1"},
            base_url=BASE,
        ).headers
    )


@pytest.mark.parametrize("base_url", [BASE, "http://api.example/v1?k=1#frag"])
def test_fixed_override_headers_never_reach_the_wire(base_url: str) -> None:
    # A collection's own headers (and connector headers a manifest check would refuse) are sent as they
    # are, but none that makes a server on the way see another method, URL or client.
    binding = PostmanBinding(
        method="GET",
        url="/users",
        headers=(("X-HTTP-Method-Override", "DELETE"), ("X-Original-URL", "/admin"), ("X-Trace", "1")),
    )
    act = Action(connector="c", path="list_users", summary="", input_schema={"type": "object"}, binding=binding)
    static = {"x-forwarded-for": "127.0.0.1", "Forwarded": "for=1", "X-Team": "a"}
    request = build_request(act, {}, base_url=base_url, static_headers=static)
    names = {name.lower() for name in request.headers}
    assert {"x-trace", "x-team"} <= names
    assert names.isdisjoint({"x-http-method-override", "x-original-url", "x-forwarded-for", "forwarded"})


def test_cookies_merge_into_one_header_and_cannot_inject_another_cookie() -> None:
    specs = (
        ParamSpec(name="session", location="cookie"),
        ParamSpec(name="theme", location="cookie"),
        ParamSpec(name="absent", location="cookie"),
    )
    args = {"session": "abc; admin=1", "theme": "dark", "absent": None}
    request = build_request(action("/x", "GET", specs=specs), args, base_url=BASE, static_headers={"Cookie": "lang=en"})
    assert request.headers.get_list("cookie") == ["lang=en; session=abc%3B%20admin=1; theme=dark"]


# -- body ------------------------------------------------------------------------------------


def test_json_body_is_an_object_of_the_body_arguments() -> None:
    act = action(params={**PATHS, "title": "body", "labels": "body", "milestone": "body"})
    args = {"owner": "o", "repo": "r", "title": "Bug ü", "labels": ["x"], "milestone": None}
    request = build_request(act, args, base_url=BASE)
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.content) == {"title": "Bug ü", "labels": ["x"], "milestone": None}
    assert request.headers["Content-Length"] == str(len(request.content))


def test_body_param_is_the_whole_body() -> None:
    act = action("/items", params={"items": "body"}, body_param="items")
    request = build_request(act, {"items": [1, 2]}, base_url=BASE)
    assert json.loads(request.content) == [1, 2]


def test_body_param_and_loose_body_arguments_conflict() -> None:
    act = action("/items", params={"items": "body", "extra": "body"}, body_param="items")
    with pytest.raises(ArgumentError, match="extra"):
        build_request(act, {"items": [1], "extra": 2}, base_url=BASE)


def test_operator_content_type_wins_over_the_generic_one() -> None:
    act = action("/x", params={"a": "body"})
    static = {"Content-Type": "application/vnd.api+json"}
    request = build_request(act, {"a": 1}, base_url=BASE, static_headers=static)
    assert request.headers["Content-Type"] == "application/vnd.api+json"


def test_form_body_nests_stripe_style() -> None:
    act = action(
        "/v1/charges", params={"amount": "body", "metadata": "body", "items": "body", "skip": "body"}, body="form"
    )
    args = {
        "amount": 2000,
        "metadata": {"order": "a&b=c", "nested": {"deep": True}},
        "items": [{"price": "p_1", "qty": 2}, "plain"],
        "skip": None,
    }
    request = build_request(act, args, base_url=BASE)
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    body = request.content.decode()
    assert body.startswith("amount=2000&metadata[order]=a%26b%3Dc&")
    assert parse_qsl(body) == [
        ("amount", "2000"),
        ("metadata[order]", "a&b=c"),
        ("metadata[nested][deep]", "true"),
        ("items[0][price]", "p_1"),
        ("items[0][qty]", "2"),
        ("items[1]", "plain"),
    ]


def test_form_body_param_must_be_an_object() -> None:
    act = action("/v1/x", params={"payload": "body"}, body="form", body_param="payload")
    assert build_request(act, {"payload": {"a": "b c"}}, base_url=BASE).content == b"a=b+c"
    with pytest.raises(ArgumentError, match="object"):
        build_request(act, {"payload": [1]}, base_url=BASE)


def test_body_arguments_on_a_bodyless_binding_are_refused() -> None:
    act = action("/x", "GET", {"a": "body"}, body="none")
    with pytest.raises(ArgumentError, match="no body"):
        build_request(act, {"a": 1}, base_url=BASE)


# -- unknown arguments and manifest bugs -----------------------------------------------------


def test_unknown_arguments_are_refused_with_what_is_accepted() -> None:
    with pytest.raises(ArgumentError) as info:
        build_request(action(params=PATHS), {"owner": "o", "repo": "r", "ownr": "x", "zz": 1}, base_url=BASE)
    message = str(info.value)
    assert "'ownr'" in message and "'zz'" in message and "owner, repo" in message
    assert [e["field"] for e in info.value.errors] == ["ownr", "zz"]


def test_a_flood_of_unknown_arguments_is_answered_in_a_few_lines() -> None:
    # 200,000 misnamed keys gave a 21 MB answer: a list six times the request's own size.
    flood = {f"key{i:06d}" + "x" * 300: i for i in range(20_000)}
    with pytest.raises(ArgumentError) as info:
        build_request(action(params=PATHS), {"owner": "o", "repo": "r", **flood}, base_url=BASE)
    errors = info.value.errors
    assert len(errors) == MAX_ARGUMENT_ERRORS + 1 and errors[-1]["message"] == "and 19,980 more"
    assert all(len(e["field"]) <= 200 for e in errors)
    assert len(str(info.value)) < 2000 and "and 19,990 more" in str(info.value)


def test_an_absolute_action_url_is_a_configuration_error() -> None:
    with pytest.raises(ValueError):
        build_request(action("https://elsewhere.example/x", "GET"), {}, base_url=BASE)


@pytest.mark.parametrize("base", ["/relative", "ftp://127.0.0.1:21", "file:///etc"])
def test_a_base_url_that_is_not_http_says_to_set_base_url_and_sends_nothing(base: str) -> None:
    # One taken from a description (Swagger `schemes: [ftp]`) answered every call with a traceback.
    with pytest.raises(UpstreamError) as info:
        build_request(action("/x", "GET"), {}, base_url=base)
    assert info.value.reason == "connector_error" and not info.value.sent
    assert "set base_url in the manifest" in str(info.value)


@pytest.mark.parametrize(
    ("base", "url", "args"),
    [
        ("http://127.0.0.1:9", "/items/{id}", {"id": "1"}),
        ("https://user:pw@api.example.com:8443/v1/", "/a b/{id}", {"id": "x/y?z#w"}),
        ("https://api.example.com", "/ünï/{id}?fixed=a|b&x=[1]", {"id": "café", "q": "a b&c=d"}),
        ("http://[::1]:8080/base?k=v", "/x/./y/{id}", {"id": "1"}),
        ("https://API.Example.COM:443", "/%7Euser/%zz/{id}", {"id": "~-._"}),
        ("https://api.example.com", "/{id}/x;y=1,2:3@4", {"id": "!$&'()*+,;=:@"}),
        ("https://api.example.com", '/a/{id}?q={id}&r="<>`^', {"id": "1", "q": ["a", "b"]}),
    ],
)
def test_urls_built_without_a_reparse_equal_httpx2s_own_parse(
    base: str, url: str, args: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # build_request skips httpx2's parse of the finished URL when its parts are already normal; the
    # URL must be exactly the one that parse gives, part by part.
    specs = (ParamSpec(name="q", location="query"),)
    request = build_request(action(url, "GET", specs=specs), args, base_url=base)
    monkeypatch.setattr(request_module, "_fast_url", lambda wire, path, query: None)
    parsed = build_request(action(url, "GET", specs=specs), args, base_url=base).url
    for expected in (parsed, httpx2.URL(str(parsed))):
        for part in ("scheme", "userinfo", "host", "port", "raw_path", "query", "fragment"):
            assert getattr(request.url, part) == getattr(expected, part), part
        assert str(request.url) == str(expected)


_SPECS = (
    ParamSpec(name="q", location="query"),
    ParamSpec(name="x-mode", location="header"),
    ParamSpec(name="Accept", location="header"),
    ParamSpec(name="session", location="cookie"),
    ParamSpec(name="name", location="body"),
)


@pytest.mark.parametrize(
    ("method", "url", "args", "static", "body"),
    [
        ("GET", "/items/{id}", {"id": "1"}, {}, "json"),
        ("GET", "/items/{id}", {"id": "ä/1", "q": ["a", "b"]}, {"X-Api-Version": "2"}, "json"),
        ("POST", "/items", {}, {}, "json"),
        ("POST", "/items", {"name": "n", "x-mode": "fast"}, {"Content-Type": "application/vnd+json"}, "json"),
        ("PUT", "/items/{id}", {"id": "1", "name": "é"}, {"Cookie": "lang=en"}, "form"),
        ("PATCH", "/a b/{id}?fixed=1", {"id": [], "session": "s;1", "Accept": "text/plain"}, {}, "json"),
        ("DELETE", "/{id}/x", {"id": "..x", "x-mode": "naïve"}, {"Accept": "a/b"}, "json"),
        ("POST", "/%7e/{id}?q={id}", {"id": "1", "name": "n"}, {}, "raw_name"),
        ("GET", "/x#frag", {}, {}, "json"),
        ("POST", "/x", {}, {"Transfer-Encoding": "chunked"}, "json"),
    ],
)
def test_the_prepared_request_is_the_general_paths_request(
    method: str, url: str, args: dict[str, Any], static: dict[str, str], body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # build_request keeps per binding what every call shares (the URL's fixed parts, the headers before
    # the arguments') and makes the request from them; it must be the request the general path makes.
    def build() -> httpx2.Request | Exception:
        binding_body, body_param = ("raw", "name") if body == "raw_name" else (body, None)
        specs = tuple(s for s in _SPECS if s.name != body_param)
        act = action(url, method, specs=specs, body=binding_body, body_param=body_param)
        try:
            return build_request(act, args, base_url="https://api.example.com:8443/v1?k=v", static_headers=static)
        except Exception as exc:  # the same refusal, too
            return exc

    prepared = build()
    monkeypatch.setattr(request_module, "_wire", lambda binding, base_url, static_headers: None)
    general = build()
    if isinstance(general, Exception):
        assert type(prepared) is type(general) and str(prepared) == str(general)
        return
    assert isinstance(prepared, httpx2.Request)
    assert (prepared.method, str(prepared.url), prepared.url.raw_path) == (
        general.method,
        str(general.url),
        general.url.raw_path,
    )
    assert prepared.headers.raw == general.headers.raw
    assert prepared.content == general.content
    assert type(prepared.stream) is type(general.stream)
    # A header the auth step adds later is encoded the same way (the headers' encoding is a state).
    for request in (prepared, general):
        request.headers["X-Later"] = "ünï"
    assert prepared.headers.raw == general.headers.raw


def test_the_prepared_parts_are_kept_per_binding_and_connector() -> None:
    act = action("/items/{id}", "GET", specs=())
    binding = act.binding
    assert isinstance(binding, OpenAPIBinding)
    build_request(act, {"id": "1"}, base_url=BASE)
    first = request_module._wire(binding, BASE, {})
    assert first is not None and first is request_module._wire(binding, BASE, {})
    # Another base URL or other static headers (a reloaded manifest) get their own.
    other = build_request(act, {"id": "1"}, base_url="https://other.example.com", static_headers={"X": "1"})
    assert str(other.url) == "https://other.example.com/items/1" and other.headers["x"] == "1"
    assert request_module._wire(binding, BASE, {}) is not first
