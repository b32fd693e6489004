"""A read that may block on a named pipe, run so that a test fails instead of hanging."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["outcome_of_reading"]


def outcome_of_reading(read: Callable[[], object], pipe: Path, *, seconds: float = 5.0) -> BaseException | None:
    """What ``read`` raised (None when it returned). One still blocked on ``pipe`` after ``seconds`` is
    freed (a writer opens the pipe and closes it, so the read sees its end) and fails the test."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            read()
            outcome.append(None)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        deadline = time.monotonic() + 5
        while worker.is_alive() and time.monotonic() < deadline:
            try:
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader has it open yet
                time.sleep(0.05)
            worker.join(0.2)
        pytest.fail(f"reading {pipe.name} blocked instead of refusing it")
    return outcome[0]
