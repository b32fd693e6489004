"""Suite-wide fixtures. ``postgres_cluster`` is session-scoped, so it has to be registered here
(once) for the store contract tests and the end-to-end tests to share one cluster."""

from __future__ import annotations

import os
from collections.abc import Iterator

# Gateways the tests start (in process and as subprocesses) rank lexically unless a test asks for
# hybrid: loading the model and embedding every bundled action in each of them would only cost time.
# Tests of hybrid discovery build their Settings with an explicit env, which this does not reach.
os.environ.setdefault("MCP_GATEWAY_DISCOVERY_MODE", "lexical")

import pytest

from mcp_gateway.discovery import EmbeddingsUnavailable
from mcp_gateway.services.logs import known_secrets
from tests.support.postgres import postgres_cluster, postgres_url


def _no_model() -> object:
    raise EmbeddingsUnavailable("the embedding model is not loaded in tests not marked 'hybrid'")


@pytest.fixture(autouse=True, scope="module")
def _secrets_of_earlier_files_forgotten() -> Iterator[None]:
    """Each test file starts with no secret learned by the files before it in this worker: the process-wide
    set only grows, and with the secrets of hundreds of closed gateways every later catalog sync looked
    for thousands of forms in each action (a bundled-default sync went from 1.5 s to past the timeout)."""
    yield
    known_secrets().forget()


@pytest.fixture(autouse=True)
def _lexical_unless_marked_hybrid(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process gateways of tests not marked ``hybrid`` (nor under tests/discovery, which test the model)
    rank lexically: ``mode: auto`` finds no model."""
    if request.node.get_closest_marker("hybrid") is None and request.node.path.parent.name != "discovery":
        monkeypatch.setattr("mcp_gateway.discovery.providers.local_provider", _no_model)


# The files that take longest, heaviest first (from `--durations` of a full run). xdist's
# `--dist loadfile` hands files to workers in collection order, so one of these collected last
# would run alone at the end while the other worker sits idle; first, they pair off and the many
# short files fill in around them.
_HEAVIEST = (
    "tests/e2e/test_elicitation.py",
    "tests/e2e/test_meta_tools.py",
    "tests/e2e/test_canary.py",
    "tests/e2e/test_production.py",
    "tests/e2e/test_approvals_e2e.py",
)


def _schedule_rank(item: pytest.Item) -> tuple[int, int]:
    path = item.nodeid.partition("::")[0]
    if path in _HEAVIEST:
        return (0, _HEAVIEST.index(path))
    return (1, 0) if path.startswith("tests/e2e/") else (2, 0)


_POSTGRES_FIXTURES = frozenset({"postgres_url", "postgres_cluster"})


def _needs_postgres(item: pytest.Item) -> bool:
    """A test that starts the PostgreSQL cluster: it asks for its fixture, or a backend-parametrized
    fixture of its runs on ``postgres`` (those fetch the URL with ``getfixturevalue``)."""
    if _POSTGRES_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in callspec.params.values()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The fast lane (`scripts/test.sh --fast`, `-m "not slow"`) starts no process, browser or
    # database: every end-to-end test and every test on PostgreSQL is slow by where it lives or what
    # it needs; the rest that start processes carry the mark in their own module.
    for item in items:
        if item.nodeid.startswith("tests/e2e/") or _needs_postgres(item):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_schedule_rank)  # stable: each file's tests stay together and in order


__all__ = ["postgres_cluster", "postgres_url"]
