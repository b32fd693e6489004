"""Each OpenAPI style and Swagger 2 collectionFormat written as the specification's examples show
(https://spec.openapis.org/oas/v3.1.0#style-examples), through the request the gateway builds."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_gateway.execution import http_request as request_module
from mcp_gateway.execution.http_request import build_request
from mcp_gateway.vocabulary.errors import ArgumentError
from mcp_gateway.vocabulary.model import Action, OpenAPIBinding, ParamLocation, ParamSpec, ParamStyle

BASE = "http://api.test"
ARRAY = [3, 4, 5]
OBJECT = {"R": 100, "G": 200, "B": 150}


def _request(location: ParamLocation, style: ParamStyle | None, explode: bool, value: Any) -> Any:
    spec = ParamSpec(name="color", location=location, style=style, style_explode=explode)
    url = "/c/{color}" if location == "path" else "/c"
    action = Action(connector="t", path="c", binding=OpenAPIBinding(method="GET", url=url, params=(spec,)))
    return build_request(action, {"color": value}, base_url=BASE)


@pytest.mark.parametrize(
    ("style", "explode", "value", "query"),
    [
        ("form", True, "blue", "color=blue"),
        ("form", True, ARRAY, "color=3&color=4&color=5"),
        ("form", False, ARRAY, "color=3,4,5"),
        ("form", True, OBJECT, "R=100&G=200&B=150"),
        ("form", False, OBJECT, "color=R,100,G,200,B,150"),
        ("spaceDelimited", False, ARRAY, "color=3%204%205"),
        ("spaceDelimited", False, OBJECT, "color=R%20100%20G%20200%20B%20150"),
        ("pipeDelimited", False, ARRAY, "color=3|4|5"),
        ("pipeDelimited", False, ["p", "q|r"], "color=p|q%7Cr"),  # a separator inside a value is escaped
        ("pipeDelimited", False, OBJECT, "color=R|100|G|200|B|150"),
        ("pipeDelimited", True, ARRAY, "color=3&color=4&color=5"),
        ("tabDelimited", False, ARRAY, "color=3%094%095"),  # Swagger 2's tsv
        ("deepObject", True, OBJECT, "color[R]=100&color[G]=200&color[B]=150"),
        ("deepObject", True, ["a", "b"], "color[0]=a&color[1]=b"),  # Stripe's expand[0]=…
        ("deepObject", True, {"a": "1", "b": {"c": "deep"}}, "color[a]=1&color[b][c]=deep"),
        ("deepObject", True, {"a b": "x&y=1", "t": ["u", "v"]}, "color[a%20b]=x%26y%3D1&color[t][0]=u&color[t][1]=v"),
        ("json", False, {"a": [1]}, "color=%7B%22a%22%3A%5B1%5D%7D"),  # a JSON ``content`` parameter
        ("form", True, [], ""),
        ("form", False, [], ""),
        (None, True, OBJECT, "color=%7B%22R%22%3A100%2C%22G%22%3A200%2C%22B%22%3A150%7D"),  # no style: as before
        (None, False, ARRAY, "color=3,4,5"),
    ],
)
def test_query_styles(
    style: ParamStyle | None, explode: bool, value: Any, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _request("query", style, explode, value).url
    assert fast.query.decode() == query
    # Made without httpx2's parse of the finished URL, it is the URL that parse gives.
    monkeypatch.setattr(request_module, "_wire", lambda binding, base_url, static_headers: None)
    assert str(_request("query", style, explode, value).url) == str(fast)


@pytest.mark.parametrize(
    ("style", "explode", "value", "path"),
    [
        ("simple", False, "blue", "/c/blue"),
        ("simple", False, ARRAY, "/c/3,4,5"),
        ("simple", True, ARRAY, "/c/3,4,5"),
        ("simple", False, OBJECT, "/c/R,100,G,200,B,150"),
        ("simple", True, OBJECT, "/c/R=100,G=200,B=150"),
        ("label", False, "blue", "/c/.blue"),
        ("label", False, ARRAY, "/c/.3,4,5"),
        ("label", True, ARRAY, "/c/.3.4.5"),
        ("label", False, OBJECT, "/c/.R,100,G,200,B,150"),
        ("label", True, OBJECT, "/c/.R=100.G=200.B=150"),
        ("matrix", False, "blue", "/c/;color=blue"),
        ("matrix", False, ARRAY, "/c/;color=3,4,5"),
        ("matrix", True, ARRAY, "/c/;color=3;color=4;color=5"),
        ("matrix", False, OBJECT, "/c/;color=R,100,G,200,B,150"),
        ("matrix", True, OBJECT, "/c/;R=100;G=200;B=150"),
        ("simple", False, ["a/b", "c,d"], "/c/a%2Fb,c%2Cd"),  # each element one escaped piece
        ("pipeDelimited", False, ARRAY, "/c/3|4|5"),  # Swagger 2's pipes in a path
        ("spaceDelimited", False, ARRAY, "/c/3%204%205"),
    ],
)
def test_path_styles(style: ParamStyle, explode: bool, value: Any, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _request("path", style, explode, value).url
    assert fast.raw_path.decode() == path
    monkeypatch.setattr(request_module, "_wire", lambda binding, base_url, static_headers: None)
    assert str(_request("path", style, explode, value).url) == str(fast)


@pytest.mark.parametrize(
    ("style", "value"),
    [("label", []), ("simple", []), ("label", ".."), ("matrix", ["..", "x"]), ("simple", {"..": "x"})],
)
def test_a_styled_path_value_cannot_be_empty_or_climb(style: ParamStyle, value: Any) -> None:
    with pytest.raises(ArgumentError) as raised:
        _request("path", style, False, value)
    assert raised.value.errors and raised.value.errors[0]["field"] == "color"


@pytest.mark.parametrize(
    ("style", "explode", "value", "header"),
    [
        ("simple", False, ARRAY, "3,4,5"),
        ("simple", False, OBJECT, "R,100,G,200,B,150"),
        ("simple", True, OBJECT, "R=100,G=200,B=150"),
        ("pipeDelimited", False, ARRAY, "3|4|5"),  # Swagger 2's pipes in a header
        (None, False, ARRAY, "3, 4, 5"),  # no style: as before
    ],
)
def test_header_styles(style: ParamStyle | None, explode: bool, value: Any, header: str) -> None:
    assert _request("header", style, explode, value).headers["color"] == header


@pytest.mark.parametrize(
    ("value", "cookie"),
    [(ARRAY, "color=3%2C4%2C5"), (OBJECT, "color=R%2C100%2CG%2C200%2CB%2C150"), ("a;b", "color=a%3Bb")],
)
def test_cookie_form_style(value: Any, cookie: str) -> None:
    # A comma is no cookie-octet (RFC 6265), so the whole value is escaped, separators too.
    assert _request("cookie", "form", False, value).headers["cookie"] == cookie


@pytest.mark.parametrize(
    ("location", "style", "explode", "value", "char"),
    [
        ("header", "simple", False, ["a", "b,c"], "','"),
        ("header", "simple", True, {"k": "v1", "v": "v,2"}, "','"),
        ("header", "simple", True, {"k": "v1", "v": "v,admin=true"}, "','"),
        ("header", "simple", True, {"k": "a=b"}, "'='"),
        ("header", "simple", False, {"k,x": "v"}, "','"),
        ("header", "pipeDelimited", False, ["p", "q|r"], "'|'"),
        ("header", None, False, ["a", "b,c"], "','"),
        ("cookie", "form", False, ["a", "b,c"], "','"),
    ],
)
def test_an_element_holding_its_separator_where_nothing_escapes_it_is_refused(
    location: ParamLocation, style: ParamStyle | None, explode: bool, value: Any, char: str
) -> None:
    # A header or cookie has no escape for its separator: "b,c" would reach the upstream as two elements.
    with pytest.raises(ArgumentError) as raised:
        _request(location, style, explode, value)
    assert char in str(raised.value) and raised.value.errors[0]["field"] == "color"


@pytest.mark.parametrize(
    ("location", "style", "explode", "value", "expected"),
    [
        ("query", "form", False, ["a", "b,c"], "color=a,b%2Cc"),
        ("path", "simple", False, ["a", "b,c"], "/c/a,b%2Cc"),
        ("header", "simple", False, "b,c", "b,c"),  # one value is no list: its comma is its own
    ],
)
def test_where_an_escape_exists_the_separator_inside_an_element_is_escaped(
    location: ParamLocation, style: ParamStyle | None, explode: bool, value: Any, expected: str
) -> None:
    request = _request(location, style, explode, value)
    wire = {"query": request.url.query.decode(), "path": request.url.raw_path.decode(), "header": None}[location]
    assert (wire if wire is not None else request.headers["color"]) == expected
