from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden.server.app import create_app
from loopwarden.server.settings import ServerSettings
from loopwarden.server.sse import BadLastEventId, parse_last_event_id
from server_jobs import parse_sse, ticking_job


@given(st.text(max_size=40), st.integers(min_value=0, max_value=10**6))
def test_parse_last_event_id_answers_every_input(value: str, last: int) -> None:
    try:
        seq = parse_last_event_id(value, last)
    except BadLastEventId as error:
        assert error.status in (400, 409)
    else:
        assert 0 <= seq <= last and (seq == 0 or value.strip() == str(seq).zfill(len(value.strip())))


def test_parse_last_event_id_cases() -> None:
    assert parse_last_event_id(None, 5) == 0
    assert parse_last_event_id("", 5) == 0
    assert parse_last_event_id(" 3 ", 5) == 3
    assert parse_last_event_id("5", 5) == 5
    with pytest.raises(BadLastEventId) as beyond:
        parse_last_event_id("6", 5)
    assert beyond.value.status == 409
    for bad in ("-1", "+1", "1e3", "0x10", "1 2", "9" * 19, "³"):
        with pytest.raises(BadLastEventId) as caught:
            parse_last_event_id(bad, 10**20)
        assert caught.value.status == 400


HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, str, int]:
    tmp = tmp_path_factory.mktemp("sse")
    (tmp / "root" / "exp").mkdir(parents=True)
    app = create_app(
        ServerSettings(db_path=tmp / "runs.db", runs_dir=tmp / "runs", allowed_roots=[tmp / "root"]),
        ticking_job,
        config_builder=lambda request: request,
    )

    async def start() -> tuple[str, int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            run_id = (await client.post("/api/runs", json={"folder": "exp"})).json()["id"]
            while (run := (await client.get(f"/api/runs/{run_id}")).json())["status"] != "completed":
                await asyncio.sleep(0.01)
            return run_id, int(run["last_seq"])

    run_id, last = asyncio.run(start())
    return app, run_id, last


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=HEADER_TEXT)
def test_any_last_event_id_header_gets_a_defined_answer(finished_run: tuple[object, str, int], value: str) -> None:
    app, run_id, last = finished_run

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": value})

    response = asyncio.run(ask())
    assert response.status_code in (200, 400, 409), response.text
    if response.status_code == 200:
        after = int(value.strip() or 0)
        frames = parse_sse(response.text)
        assert [int(f["id"]) for f in frames if "id" in f] == list(range(after + 1, last + 1))
        assert frames[-1]["event"] == "end"
    else:
        assert "detail" in json.loads(response.text)
