"""The one place the server leans on the MCP SDK's private code, or on answers it did not give itself.

``single_exchange`` imports the SDK's private wire helpers for 2026-07-28 requests;
``json_first`` overrides private methods of the SDK's transport and session manager (what
``server.mcp_endpoint`` serves ``/mcp`` with when ``ENABLED``); ``early_stdio`` claims stdin and
stdout before the SDK is imported, answers ``initialize`` and ``tools/list`` as the SDK answered
them before, and runs the SDK's low-level server over its own streams; ``param_headers`` replaces
the low-level server's schema lookup so ``Mcp-Param-*`` headers are checked only for a tool that
declares one. All were written against one
SDK release: on any other release, or with ``MCP_GATEWAY_FAST_PATHS=0``
(``settings.fast_paths_switched_on``, the switch ``tracing.fast`` obeys too), the gateway serves
through the SDK's public path alone (its own manager, handlers, schema lookup and stdio transport),
so an SDK upgrade costs speed, never correctness. The public API that would make
each path unnecessary is named in ``docs/operations.md``.

Light on purpose: the CLI reads ``ENABLED`` before anything else is imported, to decide whether
``early_stdio`` claims the standard streams.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Final

from ...vocabulary.settings import fast_paths_switched_on

__all__ = ["ENABLED", "SDK_TESTED"]

_TESTED_RELEASE = (2, 3)


def _release(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return ()


def _sdk_release() -> tuple[int, ...]:
    """The installed SDK's major and minor release, from its ``dist-info`` folder beside the package
    (a directory listing, where ``importlib.metadata`` would cost an import and a scan of the path)."""
    spec = importlib.util.find_spec("mcp")  # finds the files, imports nothing
    if spec is None or spec.origin is None:
        return ()
    site = Path(spec.origin).parent.parent
    found = [p.name[len("mcp-") : -len(".dist-info")] for p in site.glob("mcp-*.dist-info")]
    if len(found) == 1:
        return _release(found[0])
    from importlib.metadata import PackageNotFoundError, version  # not one wheel beside it: ask the metadata

    try:
        return _release(version("mcp"))
    except PackageNotFoundError:
        return ()


SDK_TESTED: Final = _sdk_release() == _TESTED_RELEASE
"""Whether the installed SDK is the release the fast paths were written and tested against."""

# Read once, at import: the switch chooses how the server is built, before any request.
ENABLED: Final = SDK_TESTED and fast_paths_switched_on()
"""Whether the fast paths run: the tested SDK release, and not switched off."""
