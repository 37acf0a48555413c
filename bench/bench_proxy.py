"""What the guard on the wire costs: latency per request (p50/p99) and time to first byte through
`loopwarden proxy`, as ratios to going direct to the same upstream, at 1 and 50 concurrent
conversations of TURNS tool turns each. Two proxies are measured: as shipped (each request resumes
the run its conversation's previous request paused, proxy/resume.py) and with `--resume-cache 0`
(each request replays the whole task), so the cost of the replay shows in the same run. Upstream,
proxies and clients are separate processes on 127.0.0.1; the paths take turns in each round so
drift in the machine's speed hits all of them. On a shared machine the latencies move with its load;
the CPU time each proxy process spends per request (from /proc) does not, and is printed too, as a
ratio to the upstream's own CPU per request.

    python bench/bench_proxy.py [--conversations 1 50] [--rounds 3] [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
TOOLS = [
    {
        "type": "function",
        "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    }
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(args: list[str], port: int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = tempfile.TemporaryFile()  # noqa: SIM115 - read back only if the process dies
    process = subprocess.Popen(args, stdout=log, stderr=log, env=env)
    for _ in range(600):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return process
        if process.poll() is not None:
            log.seek(0)
            said = log.read()[-2000:].decode(errors="replace")
            raise SystemExit(f"{args[:3]} exited with {process.returncode}: {said}")
        time.sleep(0.1)
    raise SystemExit(f"{args[:3]} did not listen on {port}")


async def conversation(
    client: httpx.AsyncClient, base: str, n: int, latencies: list[float], firsts: list[float]
) -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": f"conversation {n}: read every file"}]
    while True:
        body = {"model": "bench", "messages": messages, "tools": TOOLS, "stream": True}
        began = time.perf_counter()
        first = None
        raw = b""
        async with client.stream("POST", f"{base}/chat/completions", json=body) as response:
            async for piece in response.aiter_bytes():
                first = first or time.perf_counter()
                raw += piece
        latencies.append(time.perf_counter() - began)
        firsts.append((first or time.perf_counter()) - began)
        calls: dict[int, dict[str, str]] = {}
        for line in raw.decode().splitlines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[6:])["choices"]:
                for part in choice["delta"].get("tool_calls") or []:
                    slot = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
                    slot["id"] = slot["id"] or part.get("id", "")
                    slot["name"] += part.get("function", {}).get("name") or ""
                    slot["arguments"] += part.get("function", {}).get("arguments") or ""
        if not calls:
            return
        tool_calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls.values()
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "x" * 200} for c in calls.values()]


async def round_(base: str, conversations: int) -> tuple[list[float], list[float]]:
    latencies: list[float] = []
    firsts: list[float] = []
    limits = httpx.Limits(max_connections=conversations + 5)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(conversation(client, base, n, latencies, firsts) for n in range(conversations)))
    return latencies, firsts


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000


def row(n: int, figure: str, path: str, values: list[float], direct: list[float]) -> str:
    p50, p99, d50, d99 = pct(values, 50), pct(values, 99), pct(direct, 50), pct(direct, 99)
    return f"| {n} | {figure} | {path} | {p50:.1f} ms | {p50 / d50:.2f}x | {p99:.1f} ms | {p99 / d99:.2f}x |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=10)
    options = parser.parse_args()
    up_port = free_port()
    upstream = start([sys.executable, str(HERE / "proxy_upstream.py"), str(up_port), str(options.turns)], up_port)
    env = dict(os.environ, LOOPWARDEN_TRACE_DB="")
    proxy_args = [sys.executable, "-m", "loopwarden.cli", "proxy", "--upstream", f"http://127.0.0.1:{up_port}/v1"]
    paths = {"direct": f"http://127.0.0.1:{up_port}/v1"}
    processes = [upstream]
    pids = {"direct": upstream.pid}
    try:
        for name, extra in (("proxy", []), ("proxy, full replay", ["--resume-cache", "0"])):
            port = free_port()
            processes.append(start([*proxy_args, "--port", str(port), *extra, "--quiet"], port, env))
            paths[name] = f"http://127.0.0.1:{port}/v1"
            pids[name] = processes[-1].pid
        print("| conversations | figure | path | p50 | p50 / direct | p99 | p99 / direct |")
        print("|---|---|---|---|---|---|---|")
        for n in options.conversations:
            for base in paths.values():  # warm-up, every path
                asyncio.run(round_(base, n))
            latency: dict[str, list[float]] = {name: [] for name in paths}
            first: dict[str, list[float]] = {name: [] for name in paths}
            cpu: dict[str, float] = dict.fromkeys(paths, 0.0)  # the process's own CPU over its path's rounds
            upstream_cpu = 0.0  # the upstream's CPU over every path's rounds
            for _ in range(options.rounds):
                for name, base in paths.items():
                    before, up_before = cpu_seconds(pids[name]), cpu_seconds(upstream.pid)
                    lat, firsts = asyncio.run(round_(base, n))
                    cpu[name] += cpu_seconds(pids[name]) - before
                    upstream_cpu += cpu_seconds(upstream.pid) - up_before
                    latency[name] += lat
                    first[name] += firsts
            for figure, values in (("request latency", latency), ("time to first byte", first)):
                for name in paths:
                    print(row(n, figure, name, values[name], values["direct"]))
            upstream_per_request = upstream_cpu / sum(len(latency[name]) for name in paths)
            for name in list(paths)[1:]:
                added = statistics.median(latency[name]) - statistics.median(latency["direct"])
                print(f"| {n} | added per request (median) | {name} | {added * 1000:.1f} ms | | | |")
            for name in list(paths)[1:]:
                own = cpu[name] / len(latency[name])
                ratio = f"{own / upstream_per_request:.2f}x the upstream's" if upstream_per_request else ""
                print(f"| {n} | proxy CPU per request | {name} | {own * 1000:.2f} ms | {ratio} | | |")
        requests = len(latency["direct"])
        print(
            f"\n_{requests} requests per path at the last concurrency level; {options.turns} tool turns"
            " + an answer per conversation._"
        )
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(30)


if __name__ == "__main__":
    main()
