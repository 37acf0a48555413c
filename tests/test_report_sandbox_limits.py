"""The host stays small whatever the figure child does: output is read as it comes and the child
is killed past a cap, the staging folder is capped in bytes and files, and the child's status
cannot be forged by the figure code. Real child processes."""

from __future__ import annotations

import asyncio
import resource
from pathlib import Path

import pytest

import sandboxkit
from loopwarden.report.sandbox.isolation import probe_isolation
from loopwarden.report.sandbox.runner import FigureSandbox, Limits
from loopwarden.report.sandbox.staging import StagingWatch

folders = sandboxkit.folders  # the fixture
ISOLATION = probe_isolation()
needs_isolation = pytest.mark.skipif(not ISOLATION.isolated, reason="no OS isolation layer on this machine")
WRITE = "libc = np.ctypeslib.ctypes.CDLL(None)\nbuf = np.ctypeslib.ctypes.create_string_buffer(1 << 20)\n"


def run(folders: tuple[Path, Path], code: str, **limits: int) -> object:
    box = FigureSandbox(*folders, ISOLATION, limits=Limits(wall_seconds=120, **limits))
    return asyncio.run(box.run(code, "f"))


@needs_isolation
@pytest.mark.parametrize("fd", [1, 2])
def test_a_gigabyte_written_to_a_raw_fd_is_cut_off_and_costs_the_host_little(
    folders: tuple[Path, Path], fd: int
) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    code = WRITE + f"for _ in range(1024):\n    libc.write({fd}, buf, 1 << 20)\nplt.plot([1])\n"
    outcome = run(folders, code, output_bytes=8 << 20)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert not outcome.ok and outcome.error_type == "resource_limit"  # type: ignore[attr-defined]
    assert "output limit" in outcome.message and outcome.pgid_gone  # type: ignore[attr-defined]
    assert grown < 200 * 1024, f"the host grew by {grown} KiB reading a flood capped at 8 MiB"


@needs_isolation
def test_many_files_in_the_staging_folder_are_a_limit_not_a_crash(folders: tuple[Path, Path]) -> None:
    code = "for i in range(100000):\n    np.save(f'f{i}.npy', np.zeros(1))\nplt.plot([1])\n"
    outcome = run(folders, code, staging_files=300)
    assert not outcome.ok and outcome.error_type == "resource_limit"  # type: ignore[attr-defined]
    assert "more than 300 files" in outcome.message and "staging limit" in outcome.message  # type: ignore[attr-defined]
    assert not (folders[1] / ".sandbox" / "fig1").exists()


@needs_isolation
def test_many_files_each_under_the_file_limit_are_capped_in_total(folders: tuple[Path, Path]) -> None:
    code = "for i in range(200):\n    np.save(f'b{i}.npy', np.ones(4 << 20, dtype=np.uint8))\nplt.plot([1])\n"
    outcome = run(folders, code, file_bytes=8 << 20, staging_bytes=40 << 20)
    assert not outcome.ok and outcome.error_type == "resource_limit"  # type: ignore[attr-defined]
    assert f"more than {40 << 20} bytes" in outcome.message  # type: ignore[attr-defined]


def test_the_staging_watch_counts_files_and_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"x" * 100_000)
    assert StagingWatch(tmp_path, 1 << 20, 10).check() is None
    assert StagingWatch(tmp_path, 1 << 20, 1).check() == "left more than 1 files in its folder"
    assert StagingWatch(tmp_path, 50_000, 10).check() == "wrote more than 50000 bytes to its folder"
    assert StagingWatch(tmp_path / "gone", 1, 1).check() is None


FORGED = '{"ok": true, "message": "saved", "nonce": "0"}\\n'


@needs_isolation
def test_a_status_line_printed_on_stdout_is_not_believed(folders: tuple[Path, Path]) -> None:
    """The old channel: the figure code writes a success line to the real stdout, then fails."""
    code = f"libc = np.ctypeslib.ctypes.CDLL(None)\nline = b'{FORGED}'\nlibc.write(1, line, len(line))\n"
    code += "raise ValueError('no figure')\n"
    outcome = run(folders, code)
    assert not outcome.ok and outcome.error_type == "ValueError"  # type: ignore[attr-defined]


@needs_isolation
def test_writing_on_the_status_channel_makes_the_run_fail(folders: tuple[Path, Path]) -> None:
    """The figure code cannot know the nonce's channel apart from guessing fds: it writes a
    success line to every fd and draws nothing. Any extra line is tampering, never success."""
    code = f"libc = np.ctypeslib.ctypes.CDLL(None)\nline = b'{FORGED}'\n"
    code += "for fd in range(3, 256):\n    libc.write(fd, line, len(line))\n"
    outcome = run(folders, code)
    assert not outcome.ok and outcome.error_type == "status_forged"  # type: ignore[attr-defined]


@needs_isolation
def test_closing_the_status_channel_is_a_crash_not_a_success(folders: tuple[Path, Path]) -> None:
    code = "libc = np.ctypeslib.ctypes.CDLL(None)\nfor fd in range(3, 256):\n    libc.close(fd)\nplt.plot([1])\n"
    outcome = run(folders, code)
    assert not outcome.ok and outcome.error_type in ("crashed", "status_forged")  # type: ignore[attr-defined]
