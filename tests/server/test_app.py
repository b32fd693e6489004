"""What ``serve`` does to the process once started (``server/app.py``): the heap settled once."""

from __future__ import annotations

import gc

from mcp_gateway.server.app import YOUNG_COLLECTION_THRESHOLD, _settle_heap  # pyright: ignore[reportPrivateUsage]


def test_the_start_is_frozen_once_and_young_collections_come_less_often() -> None:
    threshold = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    try:
        gc.set_threshold(700, 10, 10)
        _settle_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 10, 10)
        gc.set_threshold(700, 10, 10)
        _settle_heap()  # once per process: a second server in it changes nothing
        assert gc.get_threshold() == (700, 10, 10)
        gc.unfreeze()
        gc.set_threshold(0, 10, 10)
        _settle_heap()
        assert gc.get_threshold() == (0, 10, 10)  # collection switched off stays off
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
