"""Bad input at the proxy, from either side: OpenAI-shaped errors with a 4xx or the upstream's own
status, never a hang, never a 500 with a traceback."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import pytest

from loopwarden.proxy.app import create_proxy
from loopwarden.proxy.settings import build_settings
from openai_server import Reply, ScriptedServer, completion, error, reply, stream, tool_call
from proxykit import READ_FILE, client_loop, proxy_in_front, wait_for_port
from server_jobs import HTTP, free_port, serve_in_thread


def post(base: str, body: Any, **kwargs: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else None
    return HTTP.post(f"{base}/chat/completions", content=content, json=None if content else body, **kwargs)


@pytest.mark.parametrize(
    "body, param",
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]"),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": 1}]}],
            },
            "messages[1].tool_calls[0]",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": "read_file"}, "tools"),
    ],
)
def test_malformed_requests_get_a_400_in_openai_shape(body: Any, param: str | None) -> None:
    with ScriptedServer(respond=lambda b: reply(completion(text="never"))) as upstream:
        with proxy_in_front(upstream) as base:
            response = post(base, body)
        assert upstream.requests == []  # nothing malformed goes upstream
    assert response.status_code == 400
    error_body = response.json()["error"]
    assert error_body["type"] == "invalid_request_error" and error_body["message"]
    assert error_body["param"] == param


def test_upstream_errors_pass_through_with_their_status_and_retry_after() -> None:
    with ScriptedServer() as upstream:
        upstream.push(error(429, "slow down", retry_after="7"), error(500, "boom"))
        with proxy_in_front(upstream) as base:
            first = post(base, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            second = post(base, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    assert first.status_code == 429 and first.headers["retry-after"] == "7"
    assert first.json()["error"]["message"] == "slow down"
    assert second.status_code == 500 and second.json()["error"]["message"] == "boom"


def test_an_upstream_that_is_down_gives_a_502() -> None:
    port = free_port()  # nothing listens there
    with serve_in_thread(create_proxy(build_settings(upstream=f"http://127.0.0.1:{port}/v1"))) as base:
        for streaming in (False, True):
            response = post(
                base + "/v1", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": streaming}
            )
            assert response.status_code == 502
            assert response.json()["error"]["type"] == "upstream_error"
            assert "unreachable" in response.json()["error"]["message"]


@pytest.mark.parametrize("garbage", ["<html>gateway</html>", '{"choices": []}', '"just a string"'])
def test_garbage_from_upstream_gives_a_502(garbage: str) -> None:
    with ScriptedServer() as upstream:
        upstream.push(Reply(body=garbage))
        with proxy_in_front(upstream) as base:
            response = post(base, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 502
    assert "not a chat completion" in response.json()["error"]["message"]


def test_a_stream_that_breaks_midway_ends_with_an_error_event() -> None:
    with ScriptedServer() as upstream:
        broken = stream(text="partial answer that goes on", pieces=4)
        assert broken.chunks is not None
        upstream.push(Reply(chunks=broken.chunks[:3], done=False))
        with proxy_in_front(upstream) as base:
            response = post(base, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    assert response.status_code == 200
    assert response.text.count("data: ") == 3  # what came through, came through, and the stream ended
    assert "[DONE]" not in response.text  # the upstream never said it was done; the proxy does not pretend


def test_a_client_that_disconnects_mid_stream_does_not_hang_the_proxy() -> None:
    slow = stream(text="x" * 400, pieces=40, chunk_delay=0.05)
    with ScriptedServer() as upstream:
        upstream.push(slow, reply(completion(text="still here")))
        with proxy_in_front(upstream) as base:
            with httpx.stream(
                "POST",
                f"{base}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
                timeout=30,
            ) as response:
                for _ in response.iter_bytes():
                    break  # hang up after the first bytes
            after = post(base, {"model": "m", "messages": [{"role": "user", "content": "again"}]})
    assert after.status_code == 200 and after.json()["choices"][0]["message"]["content"] == "still here"


def test_models_listing_passes_through() -> None:
    with ScriptedServer(models=["alpha", "beta"]) as upstream, proxy_in_front(upstream) as base:
        listed = httpx.get(f"{base}/models", timeout=30).json()
    assert [m["id"] for m in listed["data"]] == ["alpha", "beta"]


def test_the_command_refuses_bad_options_in_one_line() -> None:
    for args in (["--upstream", "not-a-url"], ["--upstream", "http://127.0.0.1:9/v1", "--host", "0.0.0.0"]):
        done = subprocess.run(
            [sys.executable, "-m", "loopwarden.cli", "proxy", *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2
        assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.stderr


def test_the_command_serves_a_guarded_loop() -> None:
    """`loopwarden proxy` as a real process: a collapsing upstream is stopped through it."""
    with ScriptedServer(
        respond=lambda b: reply(completion(tool_calls=[tool_call("read_file", {"path": "a"})]))
    ) as upstream:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "loopwarden.cli", "proxy", "--upstream", upstream.base_url, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            banner = process.stderr.readline() if process.stderr else ""  # printed before it listens
            assert "proxy on http://127.0.0.1" in banner
            wait_for_port(port, process)
            text, turns, _ = client_loop(f"http://127.0.0.1:{port}/v1", "go", lambda n, a: "same", tools=[READ_FILE])
        finally:
            process.terminate()
            process.wait(30)
    assert "repeated_call" in text and turns == 5
