"""``review``: the upstream actions held for an operator's review, and approving them.

``mcp-gateway review`` syncs, then lists every action that is new, changed since it was approved, or
flagged as instructions to the model, with a readable diff of what an agent would see and the flags.
``--all`` approves every one listed; names or globs (``lab.*``) approve those; ``--deny`` keeps the
named ones quarantined and off the list until the upstream changes them again. An approval pins the
exact snapshot shown: a running gateway makes the action visible on its next discover or call.
It also shows what a failing upstream said that agents were not shown because it reads as
instructions to the model (cleaned and redacted, with the flags): while its connector loaded, and,
the latest per action, in answer to a call.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys

from .output import EXIT_CONFIG, CliError, escaped, print_json

__all__ = ["cmd_review"]


async def cmd_review(args: argparse.Namespace) -> int:
    from ..runtime import open_gateway

    names: list[str] = list(args.names or [])
    if args.deny and (args.all or not names):
        raise CliError("--deny needs the names (or globs) of the actions to keep quarantined", EXIT_CONFIG)
    async with open_gateway(args.settings) as gw:
        held = gw.review.pending()
        if args.all:
            chosen = held
        else:
            chosen = [f for f in held if any(fnmatch.fnmatchcase(f.name, pattern) for pattern in names)]
            unmatched = [p for p in names if not any(fnmatch.fnmatchcase(f.name, p) for f in held)]
            if unmatched:
                raise CliError(f"nothing held for review matches {', '.join(map(repr, unmatched))}", EXIT_CONFIG)
        decided = []
        for finding in chosen:
            if await gw.review.decide(finding.name, approve=not args.deny, by="cli") is not None:
                decided.append(finding.name)
        # What failing upstreams said that agents were not shown: the operator reads it here.
        withheld = gw.review.withheld()
        withheld_calls = await gw.review.withheld_calls()
    verb = "denied" if args.deny else "approved"
    if args.json:
        print_json(
            {
                "held": [
                    {"name": f.name, "status": f.status, "flags": list(f.flags), "diff": f.diff()}
                    for f in held
                    if f.name not in decided
                ],
                verb: decided,
                "withheld_errors": withheld,
                "withheld_call_errors": withheld_calls,
            }
        )
        return 0
    if not (args.all or names):
        for slug, said in withheld.items():
            sys.stdout.write(f"== connector {slug}: its error text was withheld from agents\n   {escaped(said)}\n\n")
        for name, said in withheld_calls.items():
            sys.stdout.write(
                f"== action {escaped(name)}: the error text its upstream answered a call with was withheld from "
                f"the agent\n   {escaped(said)}\n\n"
            )
    if not held:
        sys.stdout.write("nothing is held for review\n")
        return 0
    if not (args.all or names):
        for f in held:
            sys.stdout.write(f"== {escaped(f.name)} ({f.status})\n")
            for flag in f.flags:
                sys.stdout.write(f"   flag: {escaped(flag)}\n")
            sys.stdout.write(escaped(f.diff(), lines=True) + "\n\n")
        sys.stdout.write(
            f"{len(held)} action(s) held for review; approve with `mcp-gateway review --all` or "
            "`mcp-gateway review NAME...` (globs allowed), or keep them out with `--deny NAME...`\n"
        )
        return 0
    for name in decided:
        sys.stdout.write(f"{escaped(name)}: {verb}\n")
    return 0
