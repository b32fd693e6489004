"""``server/observability.py``: the 503 a page or endpoint answers when it meets a store outage."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.requests import Request

from mcp_gateway.core.health import StoreHealth
from mcp_gateway.server.observability import store_unavailable_handler
from mcp_gateway.vocabulary.errors import StoreUnavailable

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Gateway:
    health = StoreHealth(None)


def _request(accept: str) -> Request:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/approve/x",
        "headers": [(b"accept", accept.encode())],
    }
    return Request(scope)


@pytest.mark.parametrize("accept", ["text/html", "application/json"])
async def test_storage_the_operator_must_fix_is_not_answered_try_again_in_a_few_seconds(accept: str) -> None:
    # A read-only standby, an empty server or a damaged file: "try again in a few seconds" never helps.
    handle = store_unavailable_handler(_Gateway())  # type: ignore[arg-type]
    broken = StoreUnavailable("the PostgreSQL database at db refuses writes (read-only)", lasting=True)
    answer = await handle(_request(accept), broken)
    text = bytes(answer.body).decode()
    assert answer.status_code == 503 and "retry-after" not in answer.headers
    assert "operator" in text and "few seconds" not in text and "read-only" not in text
    if accept == "application/json":
        assert json.loads(text)["error"] == "store_unavailable"
    down = await handle(_request(accept), StoreUnavailable("the PostgreSQL database at db is unreachable"))
    assert down.headers["retry-after"] == "5" and "few seconds" in bytes(down.body).decode()
