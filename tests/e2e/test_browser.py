"""The human pages in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright,
with JavaScript turned off, since the pages must work without it.

One browser for the module. The gateway serves the pages over HTTP at the manifest's
``public_url``; links come from the CLI (``mcp-gateway connect``, ``call``), as a user would get
them from an agent. The OAuth2 sign-in runs against the real authorization server
(``oauth2-mock-server``). Every page visited is saved as a screenshot under ``test-artifacts/``
(gitignored); one test uses a phone's viewport and checks that nothing needs horizontal scrolling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.env import child_env
from tests.support.oauth2_server import OAuth2MockServer, ProtectedApi
from tests.support.upstream import EchoApp, LoopbackServer

from .conftest import MASTER_KEY, GatewayEnv, free_port

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE: dict[str, Any] = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True}
CLIENT = {"client_id": "browser-client", "client_secret": "browser-client-secret-5521"}

MANIFEST = """
project: browser
public_url: http://127.0.0.1:{port}
front_door:
  issuer: {auth}
  approver_client_id: browser-approvals
policies:
  - {{match: "tickets.tickets.close", action: require_approval, separate_approver: true}}
connectors:
  - slug: people
    name: People API
    base_url: {api}
    auth: {{type: oauth2, authorize_url: "{auth}/authorize", token_url: "{auth}/token", scopes: [profile, read]}}
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: The signed-in account}}]}}}}
  - slug: tickets
    name: Ticket tracker
    base_url: {echo}
    auth: {{type: basic}}
    source:
      http:
        actions:
          - path: tickets.create
            method: POST
            url: /tickets
            summary: Open a ticket
            input_schema:
              type: object
              required: [title]
              properties: {{title: {{type: string}}, priority: {{type: string}}, api_token: {{type: string}}}}
          - path: tickets.close
            method: POST
            url: /tickets/{{id}}/close
            summary: Close a ticket
            input_schema: {{type: object, required: [id], properties: {{id: {{type: string}}}}}}
"""


def _playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = "playwright (pip)" if sync_playwright is None else None if CHROMIUM.exists() else str(CHROMIUM)
    if missing:
        reason = f"{missing} is not installed; run `bash scripts/test.sh`"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {reason}")
        pytest.skip(reason)
    return sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = _playwright()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Site:
    gw: GatewayEnv
    url: str
    auth: OAuth2MockServer
    api: ProtectedApi
    echo: EchoApp

    def cli(self, *args: str, check: bool = True) -> dict[str, Any]:
        proc = self.gw.cli(*args, check=check)
        return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One gateway (and authorization server) for the module; each test uses its own connector state."""
    tmp_path = tmp_path_factory.mktemp("browser")
    echo = EchoApp()
    with OAuth2MockServer() as auth, LoopbackServer(echo) as plain:
        api = ProtectedApi(auth.jwks())
        with LoopbackServer(api) as protected:
            port = free_port()
            manifest = tmp_path / "browser.yaml"
            manifest.write_text(MANIFEST.format(port=port, api=protected.base_url, auth=auth.url, echo=plain.base_url))
            env = child_env() | {
                "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
                "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
                "PYTHONUNBUFFERED": "1",
            }
            gw = GatewayEnv(tmp_path, manifest, tmp_path / "state", echo, plain.base_url, port, env)
            url = f"http://127.0.0.1:{port}"
            log = (tmp_path / "gateway.log").open("w")
            command = ["serve", "--transport", "http", "--port", str(port), "--manifest", str(manifest)]
            proc = subprocess.Popen(
                [sys.executable, "-m", "mcp_gateway", *command],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                _wait_healthy(url, proc)
                yield Site(gw, url, auth, api, echo)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
                log.close()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the gateway exited early")
        try:
            if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("the gateway did not start")


def _page(browser: Any, **options: Any) -> Any:
    context = browser.new_context(java_script_enabled=False, **options)
    return context.new_page()


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _fits(page: Any) -> None:
    """Nothing is wider than the screen (the test may run script; the page itself has none)."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"{width}px wide on a {page.viewport_size['width']}px screen"


def test_oauth2_sign_in(browser: Any, site: Site) -> None:
    link = site.cli("connect", "people")["connect_url"]
    page = _page(browser)
    page.goto(link)
    assert page.locator("h1").inner_text() == "Connect People API"
    _shot(page, "oauth2-start")
    page.fill("#client_id", CLIENT["client_id"])
    page.fill("#client_secret", CLIENT["client_secret"])
    page.click("button[type=submit]")  # -> the provider -> back to /oauth/callback
    page.wait_for_url(f"{site.url}/oauth/callback*")
    assert page.locator("h1").inner_text() == "Connected"
    _shot(page, "oauth2-connected")
    assert CLIENT["client_secret"] not in page.content()
    assert [e["grant_type"] for e in site.auth.events("token")] == ["authorization_code"]
    assert site.auth.events("authorize")[0]["code_challenge_method"] == "S256"
    me = site.cli("call", "people.me.get")
    assert me["status"] == "ok" and me["data"]["sub"] == "johndoe", me


def test_secret_page_on_a_phone(browser: Any, site: Site) -> None:
    link = site.cli("connect", "tickets")["connect_url"]
    page = _page(browser, **PHONE)
    page.goto(link)
    _fits(page)
    _shot(page, "secret-form-phone")
    page.fill("#username", "alice")
    page.fill("#password", "phone-typed-password-31")
    page.click("button[type=submit]")
    assert page.locator("h1").inner_text() == "Saved"
    _fits(page)
    _shot(page, "secret-saved-phone")
    assert "phone-typed-password-31" not in page.content()
    page.goto(link)
    assert page.locator("h1").inner_text() == "Link not valid"  # used once


def test_approve_and_deny(browser: Any, site: Site) -> None:
    site.gw.cli("secret", "set", "tickets", input='{"username": "alice", "password": "pw-for-tickets"}')
    args = json.dumps({"title": "Printer on fire", "priority": "high", "api_token": "tok-must-be-hidden"})
    pending = site.cli("call", "tickets.tickets.create", "--args", args)
    assert pending["status"] == "pending_approval", pending

    page = _page(browser, **PHONE)
    page.goto(pending["approval_url"])
    _fits(page)
    _shot(page, "approval-phone")
    text = page.inner_text("main")
    assert "tickets.tickets.create" in text and "Printer on fire" in text and "tok-must-be-hidden" not in text
    page.click("button[value=approve]")
    assert page.locator("h1").inner_text() == "Approved"
    _shot(page, "approval-approved-phone")
    ran = site.cli("call", "tickets.tickets.create", "--args", args, "--approval-id", pending["approval_id"])
    assert ran["status"] == "ok", ran

    second = site.cli("call", "tickets.tickets.create", "--args", args)
    desk = _page(browser, viewport={"width": 1280, "height": 800})
    desk.goto(second["approval_url"])
    _shot(desk, "approval-desktop")
    desk.click("button[value=deny]")
    assert desk.locator("h1").inner_text() == "Denied"
    _shot(desk, "approval-denied")
    denied = site.cli(
        "call", "tickets.tickets.create", "--args", args, "--approval-id", second["approval_id"], check=False
    )
    assert denied["reason"] == "approval_denied"
    assert sum(1 for r in site.echo.requests if r.path == "/tickets") == 1


def test_the_approval_page_folds_a_long_value_and_warns_of_hidden_characters(browser: Any, site: Site) -> None:
    """In a real browser: the long value is folded (its end hidden until opened, never cut), the
    bidi override is shown as its code under a warning banner, and the fingerprint is on the page."""
    site.gw.cli("secret", "set", "tickets", input='{"username": "alice", "password": "pw-for-tickets"}')
    title = "Printer on fire again. " * 200 + "END-OF-TITLE"
    args = json.dumps({"title": title, "priority": "\u202ewol\u202c"})
    pending = site.cli("call", "tickets.tickets.create", "--args", args)
    assert pending["status"] == "pending_approval", pending
    page = _page(browser, viewport={"width": 1280, "height": 900})
    page.goto(pending["approval_url"])
    banner = page.locator("p.warning")
    assert banner.is_visible() and "direction-changing" in banner.inner_text()
    assert page.locator("dl.arguments mark.hidden-char").first.inner_text() == "\\u202e"
    assert "\u202e" not in page.inner_text("main")
    folded = page.locator("dl.arguments details")
    assert folded.count() == 1 and folded.get_attribute("open") is None
    assert not page.get_by_text("END-OF-TITLE").is_visible()
    _shot(page, "approval-folded")
    folded.locator("summary").click()
    assert folded.get_attribute("open") is not None and page.get_by_text("END-OF-TITLE").is_visible()
    assert len(page.locator("code.fingerprint").inner_text()) == 64
    _shot(page, "approval-unfolded")
    page.click("button[value=deny]")
    assert page.locator("h1").inner_text() == "Denied"


_VISUAL_ORDER = """(element) => {
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  const seen = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getBoundingClientRect();
      seen.push([node.data[i], box.top, box.left]);
    }
  }
  seen.sort((a, b) => (Math.abs(a[1] - b[1]) > 2 ? a[1] - b[1] : a[2] - b[2]));
  return seen.map((s) => s[0]).join("");
}"""
"""The characters of an element in the order the browser draws them, line by line, left to right."""


def test_the_approval_page_shows_right_to_left_text_in_written_order(browser: Any, site: Site) -> None:
    """A Hebrew letter before "5, 5000" would have the browser draw "5000 ,5 א"; the page draws the value
    as written, says why, and marks a braille blank (a value that looks empty) as its code."""
    site.gw.cli("secret", "set", "tickets", input='{"username": "alice", "password": "pw-for-tickets"}')
    args = json.dumps({"title": "\u05d0 5, 5000", "priority": "\u2800"}, ensure_ascii=False)
    pending = site.cli("call", "tickets.tickets.create", "--args", args)
    assert pending["status"] == "pending_approval", pending
    page = _page(browser, viewport={"width": 1280, "height": 900})
    page.goto(pending["approval_url"])
    values = page.locator("dl.arguments pre")
    assert values.filter(has_text="5000").evaluate(_VISUAL_ORDER) == '"\u05d0 5, 5000"'
    banners = page.locator("p.warning").all_inner_texts()
    assert any("right-to-left letters" in banner for banner in banners), banners
    assert any("blank-looking" in banner for banner in banners), banners
    assert values.locator("mark.hidden-char").inner_text() == "\\u2800"
    _shot(page, "approval-right-to-left")
    page.click("button[value=deny]")


def test_operator_overview(browser: Any, site: Site) -> None:
    site.gw.cli("secret", "set", "tickets", input='{"username": "alice", "password": "pw-for-tickets"}')
    assert site.cli("call", "tickets.tickets.create", "--args", '{"title": "Needs a human"}')["status"] == (
        "pending_approval"
    )
    token = site.gw.cli("token", "create", "--operator").stdout.strip()
    page = _page(browser, viewport={"width": 1280, "height": 900})
    page.goto(f"{site.url}/operator")
    _shot(page, "operator-sign-in")
    page.fill("#token", token)
    page.click("button[type=submit]")
    assert page.locator("h1").inner_text().startswith("Operator overview")
    _shot(page, "operator-overview")
    assert "Needs a human" in page.inner_text("main")
    page.click("button[value=approve]")
    assert "Pending approvals (0)" in page.inner_text("main")


def test_an_approver_signs_in_with_the_identity_provider(browser: Any, site: Site) -> None:
    """The approval page's sign-in (front door ``approver_client_id``) in a real browser: the form
    leads to the provider (allowed by the page's CSP), the provider back to ``/approvals/callback``,
    which sets the session cookie and returns to the page, now naming the approver."""
    site.gw.cli("secret", "set", "tickets", input='{"username": "alice", "password": "pw-for-tickets"}')
    pending = site.cli("call", "tickets.tickets.close", "--args", '{"id": "7"}')  # asked by the operator
    assert pending["status"] == "pending_approval", pending
    page = _page(browser, viewport={"width": 1280, "height": 900})
    page.goto(pending["approval_url"])
    assert page.locator("button[value=approve]").count() == 0  # a separate approver, and nobody signed in
    site.auth.command("user maria")
    page.click("text=Sign in to approve")  # -> the provider -> /approvals/callback -> this page again
    page.wait_for_url(pending["approval_url"])
    assert "Signed in as maria" in page.inner_text("main")
    _shot(page, "approval-signed-in")
    page.click("button[value=approve]")
    assert page.locator("h1").inner_text() == "Approved"
    approvals: list[dict[str, Any]] = json.loads(site.gw.cli("approvals", "list", "--all", "--json").stdout)
    [decided] = [a for a in approvals if a["id"] == pending["approval_id"]]
    assert (decided["principal"], decided["decided_by"]) == ("operator", "maria")
    ran = site.cli("call", "tickets.tickets.close", "--args", '{"id": "7"}', "--approval-id", pending["approval_id"])
    assert ran["status"] == "ok", ran
