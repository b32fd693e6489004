"""An MCP server over stdio that refuses the handshake itself: every request, ``initialize`` first,
is answered with a JSON-RPC error whose message is ``hostile_text.hostile_error`` of its
``HOSTILE_TOKEN`` environment variable (the connector's credential, rendered into the child's
environment by the gateway).

    python -m tests.support.hostile_handshake

It speaks JSON-RPC lines without the MCP SDK, which could not be made to refuse ``initialize``; it
also starts in a fraction of the time.
"""

from __future__ import annotations

import json
import os
import sys

from tests.support.hostile_text import hostile_error


def main() -> None:
    message = hostile_error(os.environ.get("HOSTILE_TOKEN", ""))
    for line in sys.stdin:
        request = json.loads(line)
        if "id" in request:
            error = {"code": -32603, "message": message}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
