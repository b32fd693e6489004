"""Suite-wide fixtures. ``postgres_cluster`` is session-scoped, so it has to be registered here
(once) for the store contract tests and the end-to-end tests to share one cluster."""

from __future__ import annotations

from tests.support.postgres import postgres_cluster, postgres_url

__all__ = ["postgres_cluster", "postgres_url"]
