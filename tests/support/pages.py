"""Driving the human pages over plain HTTP, as a browser without JavaScript would.

    page = await get(link)                       # retries while a stdio page server starts
    done = await post(link, {"csrf": csrf(page.text), "secret": "..."})
    final = await oauth_sign_in(connect_url, client={"client_id": ..., "client_secret": ...})

Redirects are followed by hand, so each hop (the gateway's 303 to the provider, the provider's
302 back to ``/oauth/callback``) is visible to the test as ``Hop``s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

__all__ = ["Hop", "csrf", "get", "oauth_sign_in", "post"]


def csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, html
    return match.group(1)


async def get(url: str, **headers: str) -> httpx2.Response:
    # In stdio mode the page server starts when the first link is minted; give it a moment.
    async with httpx2.AsyncClient(timeout=15) as http:
        for _ in range(200):
            try:
                return await http.get(url, headers=headers)
            except httpx2.ConnectError:
                await anyio.sleep(0.05)
    raise AssertionError(f"nothing serves {url}")


async def post(
    url: str, data: dict[str, str], *, files: dict[str, Any] | None = None, **headers: str
) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=15) as http:
        return await http.post(url, data=data, files=files, headers=headers)


@dataclass(frozen=True)
class Hop:
    url: str
    status: int
    location: str | None
    text: str


async def oauth_sign_in(connect_url: str, client: dict[str, str] | None = None) -> list[Hop]:
    """Open a connect link, submit its start form (with ``client`` when the page asks for one),
    and follow the redirects through the provider back to the gateway; returns every hop."""
    first = await get(connect_url)
    assert first.status_code == 200, first.text
    hops = [Hop(connect_url, first.status_code, None, first.text)]
    data = {"csrf": csrf(first.text), **(client or {})}
    async with httpx2.AsyncClient(timeout=15, follow_redirects=False) as http:
        response = await http.post(connect_url, data=data)
        url = connect_url
        for _ in range(5):
            location = response.headers.get("location")
            hops.append(Hop(url, response.status_code, location, response.text))
            if response.status_code not in (302, 303) or location is None:
                break
            url = location
            response = await http.get(url)
    return hops
