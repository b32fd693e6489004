"""``discover`` names the bundled catalog APIs that would serve a request nothing configured serves,
with the operator's command, and never adds them; ``catalog/terms.json.gz`` is current."""

from __future__ import annotations

import functools
import gzip
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.discovery.catalog_hints import TERMS_FILE, CatalogHints, action_terms
from mcp_gateway.manifest import CATALOG_DIR, Manifest, load_manifest, parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.sources.openapi import load_openapi
from scripts.bench_catalog_hints import REQUESTS, default_gateway, named

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def settings(tmp_path: Path) -> Settings:
    env = {
        "MCP_GATEWAY_MASTER_KEY": "catalog-hints-master-key-0123456789abcdef",
        "MCP_GATEWAY_DISCOVERY_MODE": "lexical",
    }
    return Settings(manifest_path=None, state_dir=tmp_path / "state", env=env)


async def test_the_default_gateway_names_the_catalog_apis_that_send_email(tmp_path: Path) -> None:
    async with open_gateway(settings(tmp_path), embed=False) as gw:
        before = [cfg.slug for cfg in gw._catalogs.manifest.connectors]
        found = await gw.discover(OPERATOR, "send an email")
        assert found.catalog is not None
        named = {suggestion.catalog for suggestion in found.catalog}
        assert named & {"sendgrid", "gmail"} and named <= {"sendgrid", "gmail", "twilio"}
        sendgrid = next(s for s in found.catalog if s.catalog == "sendgrid")
        # The bundled default is read-only: the command writes it out as ./gateway.yaml first.
        assert sendgrid.add == "mcp-gateway init --default && mcp-gateway add sendgrid" and sendgrid.name == "SendGrid"
        assert found.hint is not None and sendgrid.add in found.hint and "restart mcp-gateway serve" in found.hint
        assert found.confidence == "low"  # what is configured does not do it well: not "high" beside that hint
        # It only says so: nothing was added, and the results are still the configured ones.
        assert [cfg.slug for cfg in gw._catalogs.manifest.connectors] == before == ["github", "petstore"]
        assert all(hit.name.split(".")[0] in before for hit in found.results)

        # What is configured serves these: no catalog API is named.
        assert (await gw.discover(OPERATOR, "open a pull request")).catalog is None
        assert (await gw.discover(OPERATOR, "add a new pet to the store")).catalog is None
        # A search inside one connector asks about that connector only.
        assert (await gw.discover(OPERATOR, "send an email", connector="github")).catalog is None


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """An operator typing ``command`` in ``cwd`` (``mcp-gateway`` run as this interpreter's module)."""
    shell = command.replace("mcp-gateway ", f"{shlex.quote(sys.executable)} -m mcp_gateway ")
    env = {**os.environ, "MCP_GATEWAY_DISCOVERY_MODE": "lexical", "MCP_GATEWAY_STATE_DIR": str(cwd / "state")}
    return subprocess.run(["bash", "-c", shell], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


async def test_the_printed_command_adds_the_api_to_what_the_gateway_serves(tmp_path: Path) -> None:
    # Served from a manifest file: the command edits that file, wherever the operator types it.
    served = tmp_path / "served" / "gw.yaml"
    served.parent.mkdir()
    served.write_text("project: p\nconnectors:\n  - slug: petstore\n    catalog: petstore\n", encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    with_file = Settings(manifest_path=served, state_dir=tmp_path / "state", env=settings(tmp_path).env)
    async with open_gateway(with_file, embed=False) as gw:
        found = await gw.discover(OPERATOR, "log work on a jira ticket")
    assert found.catalog is not None
    jira = next(s for s in found.catalog if s.catalog == "jira")
    # Every Jira site has its own host: the command says where it goes, quoted for the shell.
    assert jira.add == f"mcp-gateway add jira --base-url 'https://<your-site>.atlassian.net' --manifest {served}"
    typed = jira.add.replace("<your-site>", "acme")
    assert _run(typed + " --no-sync", tmp_path / "elsewhere").returncode == 0
    assert [c.slug for c in load_manifest(served).connectors] == ["petstore", "jira"]

    # Served from the bundled default: written out first, every connector it had kept.
    async with open_gateway(settings(tmp_path), embed=False) as gw:
        found = await gw.discover(OPERATOR, "send an email")
    assert found.catalog is not None
    sendgrid = next(s for s in found.catalog if s.catalog == "sendgrid")
    folder = tmp_path / "operator"
    folder.mkdir()
    done = _run(sendgrid.add + " --no-sync", folder)
    assert done.returncode == 0, done.stderr
    written = load_manifest(folder / "gateway.yaml")
    assert [c.slug for c in written.connectors] == ["github", "petstore", "sendgrid"]
    assert written.project == load_manifest(None).project


def test_a_configured_catalog_api_is_not_suggested_again() -> None:
    hints = CatalogHints()
    both = parse_manifest("connectors:\n  - slug: mail\n    catalog: sendgrid\n  - slug: gmail\n    catalog: gmail\n")
    assert hints.suggest(both, "send an email", [], unsure=False) == []
    alone = load_manifest(None)
    assert {hint.id for hint in hints.suggest(alone, "send an email", [], unsure=False)} >= {"sendgrid"}
    assert hints.suggest(alone, "email", [], unsure=True) == []  # one word says too little
    assert hints.suggest(alone, "what is the weather in paris", [], unsure=True) == []
    # A request naming a configured product (one this agent may not use, say) asks for no other API.
    configured = parse_manifest("connectors:\n  - slug: pay\n    catalog: stripe\n  - slug: chat\n    catalog: slack\n")
    assert hints.suggest(configured, "create a customer in stripe", [], unsure=True) == []
    assert hints.suggest(configured, "post a message in slack", [], unsure=True) == []
    assert hints.suggest(configured, "charge the card with pay", [], unsure=True) == []  # by its slug


@pytest.mark.parametrize(
    ("query", "named"),
    [
        # Everyday words that are also products' names, used as words: nothing to add.
        ("zoom in on the picture", set()),
        ("Zoom in on the chart", set()),
        ("put the shoes in a box", set()),
        ("calculate the square of 12", set()),
        ("wise words about life", set()),
        # The same words naming the product: capitalized, after "in"/"with"/"to", or before what it is.
        ("upload the report to Box", {"box"}),
        ("charge the card with Square", {"square"}),
        ("send money with wise", {"wise"}),
        ("post in slack", {"slack"}),
        ("create a zoom meeting", {"zoom"}),
    ],
)
def test_a_products_name_that_is_an_everyday_word_names_it_only_in_context(query: str, named: set[str]) -> None:
    found = CatalogHints().suggest(load_manifest(None), query, [], unsure=False)
    assert {hint.id for hint in found} == named


async def test_the_terms_file_is_current() -> None:
    data = json.loads(gzip.decompress(TERMS_FILE.read_bytes()))
    entries = sorted(path.stem for path in CATALOG_DIR.glob("*.yaml"))
    assert sorted(data) == entries, "run python scripts/build_catalog_terms.py"
    for name in entries:
        (cfg,) = parse_manifest(
            f"connectors:\n  - slug: {name}\n    catalog: {name}\n    base_url: https://x.example\n"
        ).connectors
        assert (data[name]["name"], data[name]["description"]) == (cfg.name, cfg.description), name
    # The small specs normalized again give the same terms (the large ones are normalized by test_catalog).
    for name, spec in (("petstore", "petstore.json"), ("nytimes-books", "nytimes-books.json")):
        actions = (await load_openapi(str(CATALOG_DIR / "specs" / spec), connector=name)).actions
        assert data[name]["actions"] == sorted({action_terms(a) for a in actions} - {""}), name


@functools.cache
def _default_gateway() -> tuple[Manifest, DiscoveryIndex]:
    return default_gateway()


@pytest.mark.parametrize(
    ("request_", "meant"),
    [
        # A kind of product named in two words, which the catalog entry's description says it is.
        ("send a text message to +15551234567", {"twilio", "telnyx"}),
        ("set up a video call", {"zoom"}),
        ("turn on a feature flag", {"launchdarkly"}),
        ("roll out the new checkout to 10 percent of users", {"launchdarkly"}),
        ("send money abroad to a supplier", {"wise"}),
        ("upload a file to cloud storage", {"google-drive", "box"}),
        # ... or in one word, with more of the request.
        ("send an SMS reminder", {"twilio", "telnyx"}),
        # A request opening with "text" asks for an SMS, whatever the message says.
        ("text the customer that their order shipped", {"twilio", "telnyx"}),
        ("email my team the report", {"sendgrid", "gmail"}),
        # A product named: it needs only serve the rest as an unsure ranking would.
        ("file a bug in Jira", {"jira"}),
        ("export a figma frame as png", {"figma"}),
        # A word discover reads as another ("a colleague" is a user) and an API's description.
        ("share a document with a colleague", {"google-drive", "box"}),
        ("store a file in the cloud", {"google-drive", "box"}),
        ("give the customer their money back", {"stripe", "square"}),
    ],
)
def test_the_catalog_apis_named_are_those_a_request_worded_any_way_means(request_: str, meant: set[str]) -> None:
    got = named(*_default_gateway(), CatalogHints(), request_)
    assert got and got[0] in meant, got


@pytest.mark.parametrize(
    "request_",
    ["open a pull request", "add a new pet to the store", "create an issue", "star a repository", "tell me a joke"],
)
def test_what_is_configured_or_nothing_serves_names_no_catalog_api(request_: str) -> None:
    assert named(*_default_gateway(), CatalogHints(), request_) == []


def test_the_benchmarks_requests_name_bundled_entries() -> None:
    """``scripts/bench_catalog_hints.py``'s requests: each names catalog entries that exist, in a split."""
    rows = json.loads(REQUESTS.read_text(encoding="utf-8"))
    entries = {path.stem for path in CATALOG_DIR.glob("*.yaml")}
    assert len(rows) >= 50
    for row in rows:
        assert set(row) == {"request", "catalog", "split"} and row["split"] in ("dev", "holdout"), row
        assert set(row["catalog"]) <= entries, row


def test_a_kind_of_product_already_configured_names_no_other() -> None:
    """With Twilio configured, "a text message" is served: Telnyx, an API of the same kind, is not named."""
    from scripts.bench_heldout import bundled_catalog

    manifest = parse_manifest("connectors:\n  - slug: twilio\n    catalog: twilio\n")
    index = DiscoveryIndex()
    index.replace_connector("twilio", list(bundled_catalog("twilio")))
    hints = CatalogHints()
    for request in ("send a text message to the customer", "send an SMS reminder"):
        assert named(manifest, index, hints, request) == [], request
    # A kind nothing configured is still named.
    assert named(manifest, index, hints, "set up a video call") == ["zoom"]


def test_a_connector_the_caller_may_not_use_counts_as_not_configured() -> None:
    # The hints for an agent not granted Stripe read as they would without Stripe in the manifest:
    # else "refund a charge" suggested Square only, telling the agent Stripe was configured for others.
    hints = CatalogHints()
    with_stripe = parse_manifest(
        "connectors:\n  - slug: stripe\n    catalog: stripe\n  - slug: pets\n    catalog: petstore\n"
    )
    without = parse_manifest("connectors:\n  - slug: pets\n    catalog: petstore\n")
    for query in ("refund a charge to the customer's card", "refund a charge in Stripe"):
        hidden = hints.suggest(with_stripe, query, [], unsure=True, visible={"pets"})
        absent = hints.suggest(without, query, [], unsure=True, visible={"pets"})
        assert [h.id for h in hidden] == [h.id for h in absent], query
    assert hints.suggest(with_stripe, "refund a charge in Stripe", [], unsure=True, visible={"pets", "stripe"}) == []
