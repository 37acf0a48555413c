"""Tool errors that reach the model never carry absolute host paths."""

from __future__ import annotations

from pathlib import Path

from loopwarden import tool
from loopwarden.executor import exception_result
from loopwarden.report.explore.hostpaths import scrub_host_paths


def test_data_and_output_paths_become_relative_and_others_lose_their_folders(tmp_path: Path) -> None:
    root, out = tmp_path / "data", tmp_path / "out"
    text = (
        f"[Errno 2] No such file or directory: '{root}/runs/a.csv'; "
        f"wrote {out}/figures/x.png; lib at /usr/lib/python3/dist-packages/pandas/io.py; root {root}"
    )
    scrubbed = scrub_host_paths(text, root=root, out_dir=out)
    assert str(tmp_path) not in scrubbed and "/usr/lib" not in scrubbed
    assert "'runs/a.csv'" in scrubbed and "<output>/figures/x.png" in scrubbed and ".../io.py" in scrubbed
    assert scrubbed.endswith("root .")


def test_a_raw_oserror_from_a_tool_names_only_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "secret.csv"

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return Path(path).read_text()

    try:
        missing.read_text()
    except OSError as error:
        result = exception_result(read, error)
    assert not result.ok and result.message is not None
    assert str(tmp_path) not in result.message
    assert result.message == "FileNotFoundError: No such file or directory: secret.csv"
