from __future__ import annotations

import asyncio
import io
import re
import stat
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.server.app import create_app
from loopwarden.server.jobs import RunRequest
from loopwarden.server.settings import ServerSettings, UploadLimits
from loopwarden.server.uploads import IncomingFile, UploadRejected, safe_relative_path, unpack_upload
from server_jobs import ticking_job


def make_zip(members: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
        if symlink is not None:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def unpack_zip_bytes(data: bytes, dest: Path, limits: UploadLimits | None = None) -> list[str]:
    return unpack_upload([IncomingFile("data.zip", io.BytesIO(data))], dest, limits or UploadLimits())


def test_zip_is_unpacked_with_its_folders(tmp_path: Path) -> None:
    dest = tmp_path / "run" / "input"
    written = unpack_zip_bytes(make_zip({"exp/a.csv": b"1,2\n", "exp/sub/b.txt": b"hi", "c.md": b"# c"}), dest)
    assert sorted(written) == ["c.md", "exp/a.csv", "exp/sub/b.txt"]
    assert (dest / "exp" / "sub" / "b.txt").read_bytes() == b"hi"


@pytest.mark.parametrize("name", ["../evil.txt", "/abs/evil.txt", "a/../../evil.txt", "..\\evil.txt", "C:/evil.txt"])
def test_zip_slip_is_refused_and_nothing_is_left(tmp_path: Path, name: str) -> None:
    dest = tmp_path / "run" / "input"
    with pytest.raises(UploadRejected):
        unpack_zip_bytes(make_zip({"ok.txt": b"fine", name: b"evil"}), dest)
    assert not dest.exists()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["run"]


def test_symlink_members_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UploadRejected, match="symbolic"):
        unpack_zip_bytes(make_zip({"ok.txt": b"x"}, symlink="link"), tmp_path / "in")


def test_zip_bomb_is_stopped_by_the_ratio_limit(tmp_path: Path) -> None:
    bomb = make_zip({"zeros.bin": b"\0" * (20 * 1024 * 1024)})
    assert len(bomb) < 100_000
    with pytest.raises(UploadRejected, match="ratio") as caught:
        unpack_zip_bytes(bomb, tmp_path / "in")
    assert caught.value.status == 413
    assert not (tmp_path / "in").exists()


def test_file_count_and_unpacked_size_limits(tmp_path: Path) -> None:
    many = make_zip({f"f{i}.txt": b"x" for i in range(11)})
    with pytest.raises(UploadRejected, match="too many files"):
        unpack_zip_bytes(many, tmp_path / "a", UploadLimits(max_files=10))
    big = make_zip({f"f{i}.bin": bytes(range(256)) * 40 for i in range(3)})  # 3 x 10240 bytes
    with pytest.raises(UploadRejected, match="unpacks to more than"):
        unpack_zip_bytes(big, tmp_path / "b", UploadLimits(max_unpacked_bytes=25_000))
    assert len(unpack_zip_bytes(big, tmp_path / "c", UploadLimits(max_unpacked_bytes=40_000))) == 3


def test_plain_files_keep_relative_folders_and_refuse_duplicates(tmp_path: Path) -> None:
    files = [IncomingFile("exp/a.csv", io.BytesIO(b"1")), IncomingFile("b.txt", io.BytesIO(b"2"))]
    assert unpack_upload(files, tmp_path / "ok", UploadLimits()) == ["exp/a.csv", "b.txt"]
    dup = [IncomingFile("a.txt", io.BytesIO(b"1")), IncomingFile("./a.txt", io.BytesIO(b"2"))]
    with pytest.raises(UploadRejected, match="duplicate"):
        unpack_upload(dup, tmp_path / "dup", UploadLimits())
    with pytest.raises(UploadRejected):
        unpack_upload([IncomingFile("../x", io.BytesIO(b"1"))], tmp_path / "esc", UploadLimits())
    with pytest.raises(UploadRejected):
        unpack_upload([], tmp_path / "none", UploadLimits())


def test_a_broken_zip_is_a_clear_rejection(tmp_path: Path) -> None:
    with pytest.raises(UploadRejected, match="not a valid zip"):
        unpack_zip_bytes(b"PK\x03\x04" + b"garbage" * 10, tmp_path / "in")


@given(st.text(max_size=60))
def test_any_accepted_name_stays_inside(name: str) -> None:
    try:
        relative = safe_relative_path(name)
    except UploadRejected:
        return
    assert not relative.is_absolute() and ".." not in relative.parts and relative.parts
    assert re.match(r"[A-Za-z]:", relative.parts[0]) is None  # no Windows drive


# -- through the API ------------------------------------------------------------------------


def make_app(tmp_path: Path, **upload_limits: Any) -> Any:
    settings = ServerSettings(
        db_path=tmp_path / "state" / "runs.db",
        runs_dir=tmp_path / "state" / "runs",
        uploads=UploadLimits(**upload_limits),
    )
    return create_app(settings, ticking_job, config_builder=lambda request: request)


async def wait_done(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while (run := (await client.get(f"/api/runs/{run_id}")).json())["status"] not in ("completed", "failed"):
            await asyncio.sleep(0.01)
    return run


async def test_upload_a_zip_starts_a_run_on_a_fresh_folder(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        data = make_zip({"exp/data.csv": b"t,v\n0,1\n", "job.json": b'{"events": 2}'})
        response = await client.post("/api/runs", files={"files": ("exp.zip", data, "application/zip")})
        assert response.status_code == 202, response.text
        run = await wait_done(client, response.json()["id"])
        assert run["status"] == "completed" and run["params"]["source"] == "upload (2 files)"
        assert Path(run["data_dir"]) == tmp_path / "state" / "runs" / run["id"] / "input"
        assert (Path(run["data_dir"]) / "exp" / "data.csv").read_bytes() == b"t,v\n0,1\n"
        assert run["progress"]["total"] == 2

        several = [("files", ("a.csv", b"1,2", "text/csv")), ("files", ("notes/b.md", b"# b", "text/markdown"))]
        response = await client.post("/api/runs", files=several, data={"template": "lab"})
        assert response.status_code == 202, response.text
        run = await wait_done(client, response.json()["id"])
        assert (Path(run["data_dir"]) / "notes" / "b.md").read_text() == "# b"


async def chunks() -> AsyncIterator[bytes]:
    yield b"--b\r\n"
    yield b"x" * 100


async def test_bad_uploads_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    app = make_app(tmp_path, max_upload_bytes=50_000, max_files=5)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        slip = make_zip({"../../escape.txt": b"x"})
        bomb = make_zip({"z.bin": b"\0" * (5 * 1024 * 1024)})
        many = make_zip({f"{i}.txt": b"x" for i in range(6)})
        cases = [
            (slip, 400),
            (bomb, 413),
            (many, 413),
            (b"\0" * 60_000, 413),  # too many bytes received
        ]
        for payload, status in cases:
            response = await client.post("/api/runs", files={"files": ("u.zip", payload, "application/zip")})
            assert response.status_code == status, response.text
        chunked = await client.post(
            "/api/runs",
            content=chunks(),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        assert chunked.status_code == 411
        assert (await client.get("/api/runs")).json() == []
    runs_dir = tmp_path / "state" / "runs"
    assert not runs_dir.exists() or list(runs_dir.iterdir()) == []
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "state" / "escape.txt").exists()


def test_run_request_never_stores_the_api_key() -> None:
    request = RunRequest.model_validate(
        {"data_dir": "/d", "out_dir": "/o", "model": {"preset": "deepseek", "api_key": "sk-secret"}}
    )
    assert "sk-secret" not in str(request.public_params("x"))
