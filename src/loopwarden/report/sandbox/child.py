"""The trusted bootstrap of the figure child process: `python -I child.py`, config as JSON on
stdin, one JSON status line on a pipe only the parent reads (`status_fd`, with the run's nonce).
It sets resource limits, imports the plotting stack, locks itself in (Landlock + seccomp, as
configured), then runs the model's code with only `load(path)` for data, and saves the current
figure itself. Standard library + the plotting
stack only: it never imports loopwarden (it loads two stdlib-only modules by file path)."""

from __future__ import annotations

import contextlib
import csv
import errno
import importlib.util
import io
import json
import os
import resource
import sys
import traceback
from types import ModuleType
from typing import Any, NoReturn

ALLOWED_IMPORTS = ("matplotlib", "numpy", "pandas", "math", "statistics")


def _load_module(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _limits(config: dict[str, Any]) -> None:
    # CPU: the soft limit sends SIGXCPU (a clear cause of death); the hard one a second later kills.
    resource.setrlimit(resource.RLIMIT_CPU, (config["cpu_seconds"], config["cpu_seconds"] + 1))
    for name, value in (
        ("RLIMIT_AS", config["memory_bytes"]),
        ("RLIMIT_FSIZE", config["file_bytes"]),
        ("RLIMIT_NOFILE", config["open_files"]),
        ("RLIMIT_CORE", 0),
    ):
        resource.setrlimit(getattr(resource, name), (value, value))


def _import_stack() -> dict[str, Any]:
    import math
    import statistics

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    from matplotlib import font_manager

    font_manager.findfont("DejaVu Sans")  # build the font cache before the filesystem closes
    return {"matplotlib": matplotlib, "plt": plt, "np": np, "pd": pd, "math": math, "statistics": statistics}


def _make_load(guard: Any, pd: Any, tables: dict[str, dict[str, Any]]) -> Any:
    def load(path: str, every: int = 1) -> Any:
        """A table (pandas DataFrame) from the data folder: CSV, TSV, XLSX or JSON. `every=N`
        keeps every Nth data row of a CSV/TSV, read streaming: a big table drawn from an even
        sample in bounded memory. A table the exploration profiled is read as its profile says
        (delimiter, lines above the table, column names, decimal comma)."""
        every = max(1, int(every))
        fd = guard.open_file(path)
        name = str(path).lower()
        spec = tables.get(guard.relative(path))
        with os.fdopen(fd, "rb") as f:
            if spec is not None:
                return _read_as_profiled(pd, f, spec, every)
            if name.endswith((".xlsx", ".xls", ".xlsm")):
                return pd.read_excel(io.BytesIO(f.read()))
            if name.endswith(".json"):
                return pd.read_json(f)
            head = f.read(4096).decode("utf-8", errors="replace")
            f.seek(0)
            comments = 0
            for line in head.splitlines():
                if not line.startswith("#"):
                    break
                comments += 1
            sep = "\t" if name.endswith(".tsv") else None
            if every == 1:
                return pd.read_csv(f, sep=sep, engine="python", skiprows=comments, skipinitialspace=True)
            # The C parser streams the file and keeps only the sampled rows (the header is line
            # `comments`); the delimiter is sniffed from the head, as the python parser would.
            if sep is None:
                try:
                    sep = csv.Sniffer().sniff(head.split("\n", comments)[-1][:2048], ",;\t| ").delimiter
                except csv.Error:
                    sep = ","

            def skip(i: int) -> bool:
                return i < comments or (i > comments and (i - comments - 1) % every != 0)

            return pd.read_csv(f, sep=sep, engine="c", skiprows=skip, skipinitialspace=True)

    return load


def _read_as_profiled(pd: Any, f: Any, spec: dict[str, Any], every: int) -> Any:
    skip = int(spec["skip_lines"])

    def sampled(i: int) -> bool:
        return i < skip or (i - skip) % every != 0

    return pd.read_csv(
        f,
        sep=spec["sep"],
        quotechar=spec["quotechar"],
        decimal=spec["decimal"],
        encoding=spec["codec"],
        encoding_errors="replace",
        header=None,
        names=spec["names"],
        index_col=False,
        skiprows=skip if every == 1 else sampled,
        skipinitialspace=spec["sep"] == " ",
        on_bad_lines="skip",
        engine="c",
    )


def _restricted_builtins() -> dict[str, Any]:
    import builtins

    real_import = builtins.__import__
    safe = {k: v for k, v in vars(builtins).items() if k not in {"open", "eval", "exec", "compile", "input"}}

    def guarded_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] not in ALLOWED_IMPORTS:
            raise ImportError(f"import of {name!r} is not allowed in figure code")
        return real_import(name, *args, **kwargs)

    safe["__import__"] = guarded_import
    return safe


def _isolate(config: dict[str, Any]) -> None:
    oslayers = _load_module("_lw_oslayers", config["oslayers_module"])
    if config.get("landlock_abi"):
        oslayers.apply_landlock(config["read_only"], config["read_write"], config["landlock_abi"])
    if config.get("seccomp"):
        oslayers.apply_seccomp("figure")


def _report(config: dict[str, Any], status: dict[str, Any]) -> NoReturn:
    """Write the one status line to the parent's channel, then leave at once: no atexit hook,
    `__del__` or lingering thread of the figure code runs after it (os._exit). The parent
    accepts exactly one line carrying this run's nonce, so an earlier or extra write on the
    channel (the figure code can find the fd) makes the run fail instead of succeed."""
    line = json.dumps({**status, "nonce": config["nonce"]}, default=str) + "\n"
    os.write(config["status_fd"], line.encode())
    os.close(config["status_fd"])
    os._exit(0)


def main(imported: dict[str, Any] | None = None) -> int:
    """`imported`: the plotting stack, when this process was forked by the figure zygote (which
    imported it once); the config then also names the environment the spawn path would give."""
    with os.fdopen(0, "rb", closefd=False) as stdin:
        config = json.loads(stdin.read())
    if imported is not None:
        # What a spawned child has: the config's environment, plus the LC_CTYPE Python's locale
        # coercion set at start (the zygote started with the same environment, so the same one).
        coerced = {key: value for key, value in os.environ.items() if key == "LC_CTYPE"}
        os.environ.clear()
        os.environ.update({**coerced, **config["env"]})
    os.chdir(config["workdir"])
    status: dict[str, Any]
    try:
        _limits(config)
        stack = imported if imported is not None else _import_stack()
        if imported is not None:  # forked children would otherwise share the zygote's random state
            stack["np"].random.seed()
        guard = _load_module("_lw_paths", config["paths_module"]).PathGuard(config["data_root"])
        _isolate(config)
    except Exception as error:
        _report(config, {"ok": False, "error_type": "sandbox_setup", "message": f"{type(error).__name__}: {error}"})
    load = _make_load(guard, stack["pd"], config.get("tables") or {})
    namespace: dict[str, Any] = {"__builtins__": _restricted_builtins(), "load": load}
    namespace.update(stack)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            exec(compile(config["code"], "<figure code>", "exec"), namespace)
        status = _save(stack["plt"], config["figure_path"])
    except MemoryError:
        status = {"ok": False, "error_type": "memory_limit", "message": "the code ran out of its memory limit"}
    except OSError as error:
        if error.errno == errno.EFBIG:  # Python ignores SIGXFSZ, so the limit shows up as EFBIG
            status = {"ok": False, "error_type": "file_size_limit", "message": "the code hit its file size limit"}
        else:
            status = {"ok": False, "error_type": type(error).__name__, "message": _short_traceback(error)}
    except BaseException as error:
        status = {"ok": False, "error_type": type(error).__name__, "message": _short_traceback(error)}
    status["output"] = captured.getvalue()[-2000:]
    _report(config, status)
    return 0


def _save(plt: Any, figure_path: str) -> dict[str, Any]:
    figure = plt.gcf()
    if not figure.get_axes():
        return {"ok": False, "error_type": "empty_figure", "message": "the code drew nothing (no axes on the figure)"}
    figure.savefig(figure_path, dpi=150, bbox_inches="tight")
    return {"ok": True, "message": "saved"}


def _short_traceback(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == "<figure code>"]
    where = f" (line {frames[-1].lineno} of the figure code)" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


if __name__ == "__main__":
    sys.exit(main())
