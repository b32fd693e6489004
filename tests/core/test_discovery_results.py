"""What ``discover`` and an unknown tool name hand an agent: enough to act without a second call.

In process, with the real collaborators of tests/core/test_gateway.py's harness (SQLite store, AES-GCM
vault, policies) and the real MCP SDK client over the in-memory transport.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gateway.core import result_payload
from mcp_gateway.core.discover_answer import DETAIL_SCHEMAS
from mcp_gateway.server.tools import build_mcp_server
from mcp_gateway.services.identity import OPERATOR
from tests.core.test_gateway import SECRET, harness

pytestmark = pytest.mark.anyio

MANIFEST = """
project: unit
public_url: http://pages.test
connectors:
  - slug: shop
    base_url: http://shop.test
    auth: {type: bearer}
    source:
      http:
        actions:
          - path: orders.create
            method: POST
            url: /orders
            summary: Place an order
            description: Places a new order for a customer. Charges the card on file.
            input_schema:
              type: object
              required: [customer_id, items]
              properties:
                note: {type: string, description: A note for the packer.}
                customer_id: {type: string, description: Who orders.}
                items: {type: array, description: What is ordered.}
          - path: orders.list
            method: GET
            url: /orders
            summary: List orders
          - path: orders.get
            method: GET
            url: /orders/{id}
            summary: Get one order
            input_schema: {type: object, required: [id], properties: {id: {type: string}}}
          - path: orders.cancel
            method: DELETE
            url: /orders/{id}
            summary: Cancel an order
            input_schema: {type: object, required: [id], properties: {id: {type: string}}}
          - path: order_notes.create
            method: POST
            url: /orders/{id}/notes
            summary: Add a note to an order
            input_schema: {type: object, required: [id, text], properties: {id: {type: string}, text: {type: string}}}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_discover_results_are_actionable(tmp_path: Path) -> None:
    async with harness(tmp_path, MANIFEST, secret=None) as h:
        found = result_payload(await h.gateway.discover(OPERATOR, "place an order for a customer"))
        first = found["results"][0]
        assert first["name"] == "shop.orders.create"
        assert first["summary"] == "Place an order"
        assert first["risk"] == "write"
        assert first["needs_approval"] is True  # writes need a human under the risk default
        assert first["needs_auth"] is True  # bearer auth, nothing stored yet
        assert first["required"] == ["customer_id", "items"]
        assert first["params"] == ["customer_id", "items", "note"]  # required first
        assert "input_schema" not in first  # only when asked


async def test_detail_carries_the_full_schema_of_the_first_results_only(tmp_path: Path) -> None:
    async with harness(tmp_path, MANIFEST, secret=None) as h:
        found = result_payload(await h.gateway.discover(OPERATOR, "order", limit=5, detail=True))
        results = found["results"]
        assert len(results) == 5
        for rank, result in enumerate(results):
            action = h.gateway._index.get(result["name"])
            assert action is not None
            if rank < DETAIL_SCHEMAS:
                assert result["input_schema"] == action.input_schema
            else:
                assert "input_schema" not in result


async def test_discover_tool_takes_detail_over_mcp(tmp_path: Path) -> None:
    async with harness(tmp_path, MANIFEST, secret=SECRET) as h:
        async with Client(build_mcp_server(h.gateway, default_principal=OPERATOR)) as client:
            listed = await client.list_tools()
            discover = next(tool for tool in listed.tools if tool.name == "discover")
            detail = discover.input_schema["properties"]["detail"]
            assert detail["type"] == "boolean" and detail["default"] is False
            assert "input_schema" in detail["description"]

            plain = await client.call_tool("discover", {"query": "cancel an order"})
            detailed = await client.call_tool("discover", {"query": "cancel an order", "detail": True})
    assert plain.structured_content is not None and detailed.structured_content is not None
    top: dict[str, Any] = detailed.structured_content["results"][0]
    assert top["name"] == "shop.orders.cancel"
    assert top["input_schema"]["required"] == ["id"]
    assert "input_schema" not in plain.structured_content["results"][0]
    assert SECRET not in str(detailed.content)


@pytest.mark.parametrize(
    "tool", ["shop.orders_create", "shop.ordersCreate", "SHOP.Orders.Create", "shop.orders-create"]
)
async def test_a_name_differing_only_in_separators_or_case_resolves_directly(tmp_path: Path, tool: str) -> None:
    async with harness(tmp_path, MANIFEST, secret=SECRET) as h:
        described = result_payload(await h.gateway.describe(OPERATOR, tool))
        assert described["name"] == "shop.orders.create", described
        called = (await h.gateway.call(OPERATOR, tool, {})).model_dump(exclude_none=True)
        assert (called["status"], called["reason"]) == ("denied", "invalid_args")  # found; its arguments are missing


@pytest.mark.parametrize("tool", ["shop.orders.add", "orders.create", "shop.order.place"])
async def test_a_guessed_name_answers_with_suggestions_to_act_on(tmp_path: Path, tool: str) -> None:
    async with harness(tmp_path, MANIFEST, secret=SECRET) as h:
        for answer in [
            (await h.gateway.call(OPERATOR, tool, {})).model_dump(exclude_none=True),
            result_payload(await h.gateway.describe(OPERATOR, tool)),
        ]:
            assert (answer["status"], answer["reason"]) == ("denied", "action_not_found")
            first = answer["suggestions"][0]
            assert first["name"] == "shop.orders.create", answer
            assert first["summary"] == "Place an order"
            assert first["input_schema"]["required"] == ["customer_id", "items"]
            assert "shop.orders.create" in answer["message"]
            assert SECRET not in str(answer)


@pytest.mark.parametrize("query", ["   ", "\u0000", "?", "!!! ...", "\t\n"])
async def test_a_query_with_nothing_to_search_is_refused(tmp_path: Path, query: str) -> None:
    async with harness(tmp_path, MANIFEST, secret=None) as h:
        answer = result_payload(await h.gateway.discover(OPERATOR, query))
        assert (answer["status"], answer["reason"]) == ("denied", "invalid_args")
        assert "say in words what you want to do" in answer["message"]
        # words in another script, or a symbol, are something to search
        assert "results" in result_payload(await h.gateway.discover(OPERATOR, "注文をキャンセル"))


async def test_discover_names_an_unknown_connector_and_forgives_its_case(tmp_path: Path) -> None:
    async with harness(tmp_path, MANIFEST, secret=None) as h:
        for wrong in ["jira", "shop\u0000", "x" * 100_000]:
            answer = result_payload(await h.gateway.discover(OPERATOR, "cancel an order", connector=wrong))
            assert (answer["status"], answer["reason"]) == ("denied", "connector_not_found"), answer
            assert "Yours: shop." in answer["message"] and len(answer["message"]) < 300
        for spelled in ["Shop", " shop "]:
            found = result_payload(await h.gateway.discover(OPERATOR, "cancel an order", connector=spelled))
            assert found["results"][0]["name"] == "shop.orders.cancel", spelled


async def test_full_width_and_accented_forms_read_as_plain_letters(tmp_path: Path) -> None:
    async with harness(tmp_path, MANIFEST, secret=SECRET) as h:
        found = result_payload(await h.gateway.discover(OPERATOR, "ｃａｎｃｅｌ ａｎ ｏｒｄｅｒ"))
        assert found["results"][0]["name"] == "shop.orders.cancel"
        bold = result_payload(
            await h.gateway.discover(OPERATOR, "\U0001d41c\U0001d41a\U0001d427\U0001d41c\U0001d41e\U0001d425 an order")
        )
        assert bold["results"][0]["name"] == "shop.orders.cancel"
        described = result_payload(await h.gateway.describe(OPERATOR, "ｓｈｏｐ.ｏｒｄｅｒｓ.ｃａｎｃｅｌ"))
        assert described["name"] == "shop.orders.cancel"
        combining = result_payload(await h.gateway.discover(OPERATOR, "cance\u0301l an order"))
        composed = result_payload(await h.gateway.discover(OPERATOR, "canc\u00e9l an order"))
        assert [r["name"] for r in combining["results"]] == [r["name"] for r in composed["results"]]


async def test_a_name_of_another_product_or_of_a_connector_says_so(tmp_path: Path) -> None:
    async with harness(tmp_path, MANIFEST, secret=SECRET) as h:
        # "create an order" in Shopify is not this shop's order: the closest spelling would run it
        for answer in [
            result_payload(await h.gateway.describe(OPERATOR, "shopify.orders.create")),
            (await h.gateway.call(OPERATOR, "shopify.orders.create", {})).model_dump(exclude_none=True),
        ]:
            assert (answer["status"], answer["reason"]) == ("denied", "connector_not_found"), answer
            assert "No connector for Shopify here (yours: shop)" in answer["message"]
            assert "suggestions" not in answer
        alone = result_payload(await h.gateway.describe(OPERATOR, "Shop"))
        assert (alone["status"], alone["reason"]) == ("denied", "action_not_found")
        assert "'shop' is a connector, not an action: call discover with connector 'shop'" in alone["message"]
        # a name without a product's or a connector's head is still a guess to suggest for
        guessed = result_payload(await h.gateway.describe(OPERATOR, "orders.place"))
        assert guessed["suggestions"][0]["name"] == "shop.orders.create"


async def test_a_long_query_comes_back_cut(tmp_path: Path) -> None:
    async with harness(tmp_path, MANIFEST, secret=None) as h:
        message = "Please cancel an order. " + "Some context about the customer. " * 200
        found = result_payload(await h.gateway.discover(OPERATOR, message))
        assert found["results"][0]["name"] == "shop.orders.cancel"
        assert len(found["query"]) == 300 and found["query"].endswith("…")
        assert message.startswith(found["query"][:-1])


async def test_the_query_comes_back_cleaned_of_what_the_model_should_not_read(tmp_path: Path) -> None:
    # Control, bidi and tag characters from a pasted message came back raw in the answer's "query".
    async with harness(tmp_path, MANIFEST, secret=None) as h:
        found = result_payload(await h.gateway.discover(OPERATOR, "cancel\x1b[31m an \u202eorder\U000e0041"))
        assert found["results"][0]["name"] == "shop.orders.cancel"
        assert not any(ch in found["query"] for ch in ("\x1b", "\u202e", "\U000e0041"))
        assert "cancel" in found["query"] and "order" in found["query"]
