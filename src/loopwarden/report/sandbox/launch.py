"""The trusted launcher of a contained tool (xelatex, bibtex, biber): `python -I launch.py CONFIG
-- PROGRAM ARGS...`. It sets resource limits, locks itself in (Landlock: read the TeX installation
and the document's folder, write only the build folder, execute only system binaries; seccomp's
"exec" profile: no sockets, no signals or tracing outside, no namespaces), then replaces itself
with the program, which inherits every restriction. Standard library only; it loads oslayers.py
by path and never imports loopwarden."""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    command = argv[argv.index("--") + 1 :]
    resource.setrlimit(resource.RLIMIT_CPU, (config["cpu_seconds"], config["cpu_seconds"] + 1))
    for name in ("RLIMIT_AS", "RLIMIT_FSIZE"):
        value = config[name.lower()]
        resource.setrlimit(getattr(resource, name), (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oslayers.py")
    spec = importlib.util.spec_from_file_location("_lw_oslayers", path)
    assert spec is not None and spec.loader is not None
    oslayers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oslayers)
    if config.get("landlock_abi"):
        oslayers.apply_landlock(config["read_only"], config["read_write"], config["landlock_abi"], config["executable"])
    if config.get("seccomp"):
        oslayers.apply_seccomp("exec")
    os.execve(command[0], command, dict(os.environ))
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
