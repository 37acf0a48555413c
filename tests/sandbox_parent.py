"""A sandbox parent in its own process, for tests whose figure code attacks the parent: it runs
each figure code given on stdin (a JSON list; "{parent}" in a code is replaced by this process's
pid) through a FigureSandbox with the isolation this machine has, and prints one JSON outcome per
line. Run as `python tests/sandbox_parent.py DATA OUT < codes.json`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from loopwarden.report.sandbox.isolation import probe_isolation
from loopwarden.report.sandbox.runner import FigureSandbox, Limits


async def main() -> None:
    box = FigureSandbox(Path(sys.argv[1]), Path(sys.argv[2]), probe_isolation(), limits=Limits(wall_seconds=60))
    for code in json.loads(sys.stdin.read()):
        outcome = await box.run(code.replace("{parent}", str(os.getpid())), "attack")
        print(json.dumps({"ok": outcome.ok, "error_type": outcome.error_type, "message": outcome.message}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
