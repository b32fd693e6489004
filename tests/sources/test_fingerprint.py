"""A connector's fingerprint: its settings and the bytes of the files its source read."""

from __future__ import annotations

import os
from pathlib import Path

from mcp_gateway.manifest import ConnectorConfig
from mcp_gateway.sources._fingerprint import current_fingerprint
from tests.support.named_pipe import outcome_of_reading


def test_a_read_file_replaced_by_a_named_pipe_or_a_device_has_no_fingerprint(tmp_path: Path) -> None:
    # The listing's check read the named pipe, waiting for ever, and would read /dev/zero for ever.
    cfg = ConnectorConfig.model_validate(
        {"slug": "x", "base_url": "http://127.0.0.1:9", "source": {"openapi": "spec.yaml"}}
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text("openapi: 3.0.0\n")
    assert current_fingerprint(cfg, [str(spec)]) is not None
    spec.unlink()
    os.mkfifo(spec)
    found: list[str | None] = []
    assert outcome_of_reading(lambda: found.append(current_fingerprint(cfg, [str(spec)])), spec) is None
    assert found == [None]
    assert current_fingerprint(cfg, ["/dev/null"]) is None
