"""``no_cookies``: the jar of every client that talks to an upstream keeps no cookie."""

from __future__ import annotations

import httpx2
import pytest

from mcp_gateway.primitives.cookies import no_cookies


@pytest.mark.anyio
async def test_an_upstreams_set_cookie_never_rides_along_with_the_next_request() -> None:
    sent: list[str | None] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.headers.get("cookie"))
        return httpx2.Response(200, headers={"set-cookie": "upsess=alice-session-123; Path=/"})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream), cookies=no_cookies()) as client:
        for _ in range(3):
            await client.get("http://upstream.test/mcp")
    assert sent == [None, None, None]
    assert len(no_cookies()) == 0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
