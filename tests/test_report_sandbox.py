"""The figure sandbox: the static check guides, the isolated child process contains. Each
hostile case must have no effect outside, give a clear result, and leave no process behind."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from pathlib import Path

import pytest

from helpers import require_binary
from loopwarden.report.sandbox import runner as runner_module
from loopwarden.report.sandbox.isolation import Isolation, probe_bwrap, probe_isolation
from loopwarden.report.sandbox.oslayers import seccomp_program
from loopwarden.report.sandbox.runner import FigureSandbox, Limits, safe_filename
from loopwarden.report.sandbox.static import check_code

ISOLATION = probe_isolation()
needs_isolation = pytest.mark.skipif(not ISOLATION.isolated, reason="no OS isolation layer on this machine")


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, out, outside = tmp_path / "data", tmp_path / "out", tmp_path / "outside"
    for folder in (data, out, outside):
        folder.mkdir()
    (data / "scan.csv").write_text("x,y\n1,2\n2,4\n3,9\n")
    (outside / "secret.txt").write_text("top secret")
    return data, out, outside


def sandbox(folders: tuple[Path, Path, Path], isolation: Isolation = ISOLATION, wall: float = 30) -> FigureSandbox:
    return FigureSandbox(folders[0], folders[1], isolation, limits=Limits(wall_seconds=wall, cpu_seconds=20))


# -- static check -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        ("import os", "import of `os` is not allowed"),
        ("from subprocess import run", "import of `subprocess`"),
        ("open('/etc/passwd')", "`open` is not allowed"),
        ("eval('1')", "`eval`"),
        ("exec('1')", "`exec`"),
        ("compile('1', 'x', 'exec')", "`compile`"),
        ("__import__('os')", "`__import__`"),
        ("x = ().__class__", "double-underscore attributes"),
        ("__builtins__", "double-underscore names"),
        ("plt.savefig('/tmp/x.png')", "do not save the figure yourself"),
        ("def f(:\n", "syntax error"),
    ],
)
def test_static_check_explains_each_refusal(code: str, needle: str) -> None:
    problems = check_code(code)
    assert any(needle in p for p in problems), problems


def test_static_check_accepts_plain_plotting_code() -> None:
    code = "import numpy as np\nimport math\ndf = load('scan.csv')\nplt.plot(df['x'], np.sqrt(df['y']))\n"
    assert check_code(code) == []


def test_rejected_code_never_starts_a_process(folders: tuple[Path, Path, Path]) -> None:
    outcome = asyncio.run(sandbox(folders).run("import os\nos.system('touch /tmp/x')", "f"))
    assert not outcome.ok and outcome.error_type == "code_rejected" and "import of `os`" in outcome.message


def test_seccomp_program_jumps_stay_in_range() -> None:
    for machine in ("x86_64", "aarch64"):
        program = seccomp_program(machine)
        for index, (code, jt, jf, _k) in enumerate(program):
            if code & 0x07 == 0x05:  # a jump
                assert index + 1 + jt < len(program) and index + 1 + jf < len(program)
        assert program[-1][0] == 0x06 and program[-2][0] == 0x06  # ends in returns


# -- the real boundary --------------------------------------------------------------------------


@needs_isolation
def test_plain_figure_is_saved_by_the_runtime(folders: tuple[Path, Path, Path]) -> None:
    code = "df = load('scan.csv')\nplt.plot(df['x'], df['y'])\nplt.xlabel('x')"
    outcome = asyncio.run(sandbox(folders).run(code, "../../evil name.png"))
    assert outcome.ok, outcome.message
    assert outcome.path == "figures/evil_name.png"
    assert (folders[1] / "figures" / "evil_name.png").read_bytes().startswith(b"\x89PNG")
    assert outcome.pgid_gone
    assert not (folders[1] / ".sandbox" / "fig1").exists()  # staging cleaned up


def test_load_every_nth_row_reads_an_even_sample(folders: tuple[Path, Path, Path]) -> None:
    # A comment line, a semicolon delimiter and 10,000 rows: every=100 keeps rows 0, 100, ... 9900.
    rows = "\n".join(f"{t};{t * 0.5}" for t in range(10_000))
    (folders[0] / "big.csv").write_text(f"# logger export\nt;v\n{rows}\n")
    code = (
        "df = load('big.csv', every=100)\n"
        "assert list(df.columns) == ['t', 'v'], list(df.columns)\n"
        "assert len(df) == 100 and list(df['t'][:3]) == [0, 100, 200] and df['t'].iloc[-1] == 9900, df.head()\n"
        "assert len(load('big.csv')) == 10_000\n"
        "plt.plot(df['t'], df['v'])"
    )
    outcome = asyncio.run(sandbox(folders).run(code, "sampled"))
    assert outcome.ok, outcome.message


@needs_isolation
def test_subprocess_through_matplotlib_internals_is_contained(folders: tuple[Path, Path, Path]) -> None:
    marker = folders[2] / "pwned"
    code = f"matplotlib.subprocess.run(['/bin/touch', {str(marker)!r}])\nplt.plot([1, 2])"
    assert check_code(code) == []  # passes the static layer: the OS layer must hold
    outcome = asyncio.run(sandbox(folders).run(code, "f"))
    assert not outcome.ok and "not permitted" in outcome.message
    assert not marker.exists() and outcome.pgid_gone


@needs_isolation
def test_os_system_through_numpy_ctypes_is_contained(folders: tuple[Path, Path, Path]) -> None:
    marker = folders[2] / "pwned2"
    code = f"rc = np.ctypeslib.ctypes.CDLL(None)['system']({f'touch {marker}'.encode()!r})\nplt.plot([rc])"
    assert check_code(code) == []
    outcome = asyncio.run(sandbox(folders).run(code, "f"))
    assert not marker.exists() and outcome.pgid_gone  # system() could not start a process


@needs_isolation
def test_reading_etc_passwd_with_pandas_is_contained(folders: tuple[Path, Path, Path]) -> None:
    code = "df = pd.read_csv('/etc/passwd', sep=':', header=None)\nplt.plot(df[2])"
    outcome = asyncio.run(sandbox(folders).run(code, "f"))
    assert not outcome.ok and outcome.error_type == "PermissionError" and "/etc/passwd" in outcome.message


@needs_isolation
def test_reading_outside_through_load_is_refused(folders: tuple[Path, Path, Path]) -> None:
    outcome = asyncio.run(sandbox(folders).run("df = load('../outside/secret.txt')\nplt.plot([1])", "f"))
    assert not outcome.ok and "out of bounds" in outcome.message


@needs_isolation
def test_writing_outside_the_output_folder_is_contained(folders: tuple[Path, Path, Path]) -> None:
    target = folders[2] / "written.txt"
    data_target = folders[0] / "tampered.csv"
    code = f"np.savetxt({str(target)!r}, np.ones(3))\nplt.plot([1])"
    outcome = asyncio.run(sandbox(folders).run(code, "f"))
    assert not outcome.ok and outcome.error_type == "PermissionError"
    code = f"pd.DataFrame({{'a': [1]}}).to_csv({str(data_target)!r})\nplt.plot([1])"
    outcome = asyncio.run(sandbox(folders).run(code, "f"))
    assert not outcome.ok
    assert not target.exists() and not data_target.exists()


@needs_isolation
def test_opening_a_socket_is_contained(folders: tuple[Path, Path, Path]) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    thread = threading.Thread(target=accept)
    thread.start()
    code = f"df = pd.read_csv('http://127.0.0.1:{port}/x.csv')\nplt.plot(df)"
    outcome = asyncio.run(sandbox(folders).run(code, "f"))
    thread.join()
    server.close()
    assert not outcome.ok and "not permitted" in outcome.message
    assert accepted == []  # no connection ever reached the server


@needs_isolation
def test_infinite_loop_is_killed_with_its_process_group(folders: tuple[Path, Path, Path]) -> None:
    outcome = asyncio.run(sandbox(folders, wall=4).run("while True:\n    pass", "f"))
    assert not outcome.ok and outcome.error_type == "timeout" and "wall-clock" in outcome.message
    assert outcome.pgid_gone


@needs_isolation
def test_allocating_8_gb_is_contained(folders: tuple[Path, Path, Path]) -> None:
    outcome = asyncio.run(sandbox(folders).run("a = np.ones(8 * 1024**3, dtype=np.uint8)\nplt.plot([1])", "f"))
    assert not outcome.ok and outcome.error_type == "memory_limit" and outcome.pgid_gone


@needs_isolation
def test_sandbox_goes_on_after_a_hostile_figure(folders: tuple[Path, Path, Path]) -> None:
    box = sandbox(folders)

    async def both() -> tuple[bool, bool]:
        bad = await box.run("pd.read_csv('/etc/passwd')", "bad")
        good = await box.run("plt.plot([1, 2, 3])", "good")
        return bad.ok, good.ok

    assert asyncio.run(both()) == (False, True)


def test_without_isolation_figures_are_switched_off_unless_opted_in(folders: tuple[Path, Path, Path]) -> None:
    none = Isolation(landlock_abi=None, seccomp=False, bwrap=None)
    outcome = asyncio.run(sandbox(folders, none).run("plt.plot([1])", "f"))
    assert not outcome.ok and outcome.error_type == "figures_disabled"
    opted = FigureSandbox(folders[0], folders[1], none, allow_rlimits_only=True)
    assert opted.enabled and opted.layer == "rlimits-only"
    assert asyncio.run(opted.run("plt.plot([1])", "f")).ok


def test_bubblewrap_layer_contains_reads_outside(folders: tuple[Path, Path, Path]) -> None:
    require_binary("bwrap")
    path = probe_bwrap()
    if path is None:
        pytest.skip("bwrap is installed but cannot create namespaces here")
    isolation = Isolation(landlock_abi=None, seccomp=ISOLATION.seccomp, bwrap=path)
    box = sandbox(folders, isolation)
    secret = folders[2] / "secret.txt"
    outcome = asyncio.run(box.run(f"df = pd.read_csv({str(secret)!r})\nplt.plot([1])", "f"))
    assert not outcome.ok and outcome.pgid_gone
    assert asyncio.run(box.run("df = load('scan.csv')\nplt.plot(df['x'], df['y'])", "ok")).ok


def test_safe_filename() -> None:
    assert safe_filename("../../etc/passwd") == "passwd.png"
    assert safe_filename("") == "figure.png"
    assert safe_filename("Field scan (run 1).svg") == "Field_scan_run_1.png"


@needs_isolation
def test_cpu_time_limit_kills_a_busy_child(folders: tuple[Path, Path, Path]) -> None:
    box = FigureSandbox(folders[0], folders[1], ISOLATION, limits=Limits(cpu_seconds=2, wall_seconds=60))
    outcome = asyncio.run(box.run("x = 0\nwhile True:\n    x += 1", "f"))
    assert not outcome.ok and outcome.error_type == "crashed" and "CPU time limit" in outcome.message
    assert outcome.pgid_gone


@needs_isolation
def test_file_size_limit_stops_a_huge_write(folders: tuple[Path, Path, Path]) -> None:
    box = FigureSandbox(folders[0], folders[1], ISOLATION, limits=Limits(file_bytes=1 << 20, wall_seconds=60))
    outcome = asyncio.run(box.run("pd.DataFrame(np.zeros((400000, 4))).to_csv('big.csv')\nplt.plot([1])", "f"))
    assert not outcome.ok and "file size limit" in outcome.message and outcome.pgid_gone


def test_a_fresh_staging_folder_is_made_even_while_something_writes_into_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A figure spawned again after its zygote died gets a fresh staging folder while the first
    try's folder may still be written into (seen in CI: a file made after the removal had listed
    the folder left it standing, and making `work` afresh failed with FileExistsError)."""
    staging = tmp_path / "fig2"
    (staging / "work").mkdir(parents=True)
    (staging / "work" / "left.png").write_bytes(b"old")
    removed: list[Path] = []

    def remove_then_written_into(path: Path, ignore_errors: bool = False) -> None:
        real_rmtree(path, ignore_errors=ignore_errors)
        removed.append(Path(path))
        (Path(path) / "work").mkdir(parents=True)  # a late writer puts the folder back
        (Path(path) / "work" / "go.tmp").write_bytes(b"late")

    real_rmtree = runner_module.shutil.rmtree
    monkeypatch.setattr(runner_module.shutil, "rmtree", remove_then_written_into)
    runner_module._fresh(staging)
    assert removed and all(path != staging for path in removed)  # the old folder, renamed aside
    assert sorted(p.name for p in staging.iterdir()) == ["mpl", "work"]
    assert list((staging / "work").iterdir()) == [] and list((staging / "mpl").iterdir()) == []
