"""Readers: clipped, continuable text (without re-reading big files), tables, documents,
notebooks, binary files and images."""

from __future__ import annotations

import asyncio
import io
import json
import re
import tracemalloc
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.models import FunctionModel, ModelRequest
from loopwarden.report.folder.paths import PathGuard
from loopwarden.report.readers import MAX_CHARS, FileReader, images
from loopwarden.report.readers.images import NO_READER, OcrReader, read_image_bytes
from loopwarden.report.readers.text import STEP, LineIndex


def reader(root: Path) -> FileReader:
    return FileReader(PathGuard(root))


def test_text_is_clipped_with_one_closing_line_that_says_how_to_continue(tmp_path: Path) -> None:
    lines = [f"row {i:04d} " + "y" * 60 + "\n" for i in range(1000)]
    (tmp_path / "notes.txt").write_text("".join(lines))
    first = reader(tmp_path).read("notes.txt")
    body, closing = first.text.rsplit("\n", 1)
    assert len(body) <= MAX_CHARS and not first.complete
    match = re.fullmatch(
        r'\[truncated: showed lines 1-(\d+) of 1000\. Continue with read_file\(path="notes.txt", offset=(\d+)\)\.\]',
        closing,
    )
    assert match and match.group(1) == match.group(2)
    following = reader(tmp_path).read("notes.txt", offset=int(match.group(2)), limit=5)
    assert following.text.splitlines()[:5] == [
        line.rstrip("\n") for line in lines[int(match.group(2)) : int(match.group(2)) + 5]
    ]
    assert "offset=" in following.text.splitlines()[-1] and "limit=5" in following.text.splitlines()[-1]
    last = reader(tmp_path).read("notes.txt", offset=995)
    assert last.complete and "truncated" not in last.text and last.text.count("\n") == 5


def test_short_text_is_shown_whole(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\nshort\n")
    outcome = reader(tmp_path).read("a.md")
    assert outcome.text == "# Title\nshort\n" and outcome.complete and outcome.total_lines == 2


def test_offset_past_the_end_says_so(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    assert "past the end" in reader(tmp_path).read("a.txt", offset=10).text


def test_a_huge_line_is_cut_and_said_so(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("z" * 50_000 + "\nnext\n")
    outcome = reader(tmp_path).read("one.txt")
    assert outcome.text.startswith("z" * 100) and "only its first 7000 are shown" in outcome.text
    assert reader(tmp_path).read("one.txt", offset=1).text.startswith("next")


def test_continuing_a_big_file_does_not_reread_it_from_the_start(tmp_path: Path) -> None:
    # 40 MB of short lines: the index is built once, then each continuation reads locally.
    line = b"0123456789" * 7 + b"\n"
    n_lines = 570_000  # about 40 MB
    with (tmp_path / "big.log").open("wb") as f:
        for _ in range(0, n_lines, 10_000):
            f.write(line * 10_000)
    files = reader(tmp_path)
    files.read("big.log", offset=0)
    index = files.index_of("big.log")
    assert index is not None and index.total_lines == n_lines
    for offset in (n_lines - 10, n_lines // 2, 123_457):
        before = index.bytes_read
        outcome = files.read("big.log", offset=offset, limit=3)
        assert outcome.start == offset and outcome.text.startswith("0123456789")
        assert index.bytes_read - before < (STEP + 3) * len(line)  # at most one checkpoint gap
    assert files.index_of("big.log") is index  # built once, reused


def bytes_read_by_this_process() -> int:
    """The kernel's count of bytes this process has read (all read/pread calls), from /proc."""
    for row in Path("/proc/self/io").read_text().splitlines():
        if row.startswith("rchar:"):
            return int(row.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_continuations_read_only_locally_as_the_kernel_counts(tmp_path: Path) -> None:
    # Independent of the index's own bookkeeping: what the process actually read from files.
    line = b"abcdefghij" * 5 + b"\n"
    n_lines = 1_000_000  # 51 MB
    with (tmp_path / "big.txt").open("wb") as f:
        for _ in range(0, n_lines, 10_000):
            f.write(line * 10_000)
    size = n_lines * len(line)
    files = reader(tmp_path)
    before = bytes_read_by_this_process()
    files.read("big.txt")
    first = bytes_read_by_this_process() - before
    assert size <= first < size + (1 << 20)  # the index is built in one pass over the file
    for offset in (10, n_lines // 2, n_lines - 5, 3 * n_lines // 4 + 1):
        before = bytes_read_by_this_process()
        outcome = files.read("big.txt", offset=offset, limit=4)
        assert outcome.start == offset and outcome.text.startswith("abcdefghij")
        assert bytes_read_by_this_process() - before < 256 * 1024  # one checkpoint gap plus buffers


def test_skipping_a_huge_line_does_not_hold_it_in_memory(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_bytes(b"z" * (40 << 20) + b"\nnext\n")
    files = reader(tmp_path)
    files.read("one.txt")  # builds the index
    tracemalloc.start()
    try:
        outcome = files.read("one.txt", offset=1)  # skips line 0, 40 MB, from the same checkpoint
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.text.startswith("next") and outcome.complete
    assert peak < 8 << 20


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab\u00e9 ", max_size=12), max_size=700), st.booleans(), st.data())
def test_line_index_finds_every_line(parts: list[str], trailing: bool, data: st.DataObject) -> None:
    text = "\n".join(parts) + ("\n" if trailing and parts else "")
    raw = text.encode()
    f = io.BytesIO(raw)
    index = LineIndex.build(f)
    expected = raw.splitlines(keepends=True)
    assert index.total_lines == len(expected)
    offset = data.draw(st.integers(0, len(expected) + 2))
    assert index.lines(f, offset, 4) == expected[offset : offset + 4]


def test_csv_profile_with_header_comments(tmp_path: Path) -> None:
    rows = "\n".join(f"{x},{2 * x + 1},{'ab'[x % 2]}" for x in range(50))
    (tmp_path / "scan.csv").write_text("# run 7, probe HP-200\n# units: mm, mT\nx_mm,b_mT,label\n" + rows + "\n")
    outcome = reader(tmp_path).read("scan.csv")
    assert outcome.mode == "table" and outcome.complete
    profile = outcome.tables[0]
    assert profile.rows == 50 and profile.columns == ["x_mm", "b_mT", "label"]
    assert profile.numeric_summary["b_mT"]["max"] == 99 and profile.numeric_summary["x_mm"]["mean"] == 24.5
    assert "Header comments: run 7, probe HP-200 | units: mm, mT" in outcome.text
    assert "x_mm~b_mT r=+1.000" in outcome.text and "First rows:" in outcome.text
    raw = reader(tmp_path).read("scan.csv", offset=2, limit=2)
    assert raw.mode == "text" and raw.text.startswith("x_mm,b_mT,label\n0,1,a")


def test_tsv_and_semicolon_tables(tmp_path: Path) -> None:
    (tmp_path / "t.tsv").write_text("a\tb\n1\t2\n3\t4\n")
    (tmp_path / "s.csv").write_text("a;b\n1,5;2\n3,5;4\n")
    assert reader(tmp_path).read("t.tsv").tables[0].columns == ["a", "b"]
    assert reader(tmp_path).read("s.csv").tables[0].columns == ["a", "b"]


def test_xlsx_profile_per_sheet(tmp_path: Path) -> None:
    import pandas as pd

    with pd.ExcelWriter(tmp_path / "book.xlsx") as writer:
        pd.DataFrame({"t_s": [0, 1, 2], "v_V": [0.0, 0.5, 1.0]}).to_excel(writer, sheet_name="run1", index=False)
        pd.DataFrame({"t_s": [0, 1], "v_V": [1.0, 2.0]}).to_excel(writer, sheet_name="run2", index=False)
    outcome = reader(tmp_path).read("book.xlsx")
    assert [p.path for p in outcome.tables] == ["book.xlsx#run1", "book.xlsx#run2"]
    assert outcome.tables[0].numeric_summary["v_V"]["max"] == 1.0 and "sheet 'run2'" in outcome.text


def test_pdf_text_by_page(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    with PdfPages(tmp_path / "paper.pdf") as pdf:
        for words in ("Resonance frequency 440 Hz", "Damping ratio 0.05"):
            fig = Figure()
            fig.text(0.1, 0.5, words)
            pdf.savefig(fig)
    outcome = reader(tmp_path).read("paper.pdf")
    assert outcome.mode == "document"
    assert "--- page 1 of 2 ---" in outcome.text and "Resonance frequency 440 Hz" in outcome.text
    assert "Damping ratio 0.05" in outcome.text


def test_docx_paragraphs_headings_and_tables(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Lab brief", level=1)
    document.add_paragraph("Measure the spring constant.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "mass_g", "extension_mm"
    table.cell(1, 0).text, table.cell(1, 1).text = "100", "12"
    document.save(str(tmp_path / "brief.docx"))
    text = reader(tmp_path).read("brief.docx").text
    assert "# Lab brief" in text and "Measure the spring constant." in text and "mass_g | extension_mm" in text


def test_notebook_cells_and_outputs(tmp_path: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Analysis\n", "fit the decay"]},
            {
                "cell_type": "code",
                "source": "tau = fit(t, v)\nprint(tau)",
                "outputs": [
                    {"output_type": "stream", "text": ["3.2 ms\n"]},
                    {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": ["<Figure>"]}},
                    {"output_type": "error", "ename": "ValueError", "evalue": "bad fit"},
                ],
            },
        ]
    }
    (tmp_path / "a.ipynb").write_text(json.dumps(notebook))
    text = reader(tmp_path).read("a.ipynb").text
    assert "[1] markdown" in text and "fit the decay" in text and "tau = fit(t, v)" in text
    assert "3.2 ms" in text and "[image output: image/png]" in text and "[error] ValueError: bad fit" in text


def test_json_and_yaml(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"gain": 2, "channels": [1, 2]}')
    (tmp_path / "bad.json").write_text("{nope")
    (tmp_path / "p.yaml").write_text("gain: 2\n")
    assert '"gain": 2' in reader(tmp_path).read("p.json").text
    assert "not valid JSON" in reader(tmp_path).read("bad.json").text
    assert reader(tmp_path).read("p.yaml").text == "gain: 2\n"


def test_binary_files_get_a_message_not_bytes(tmp_path: Path) -> None:
    (tmp_path / "dump.bin").write_bytes(b"\x00\x01\x02garbage" * 100)
    (tmp_path / "arr.npy").write_bytes(b"\x93NUMPY\x01\x00" + b"\x00" * 50)
    outcome = reader(tmp_path).read("dump.bin")
    assert outcome.mode == "binary" and "binary file (1000 bytes" in outcome.text and "garbage" not in outcome.text
    assert "NumPy array" in reader(tmp_path).read("arr.npy").text


def test_images_are_pointed_to_read_image(tmp_path: Path) -> None:
    (tmp_path / "p.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert "use read_image" in reader(tmp_path).read("p.png").text


def png_with_text(text: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 1.5), dpi=80)
    fig.text(0.05, 0.4, text, fontsize=16)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def test_image_without_any_reader_says_so_with_its_size() -> None:
    reading = asyncio.run(read_image_bytes("f.png", "png", png_with_text("hi"), "", vision=None, ocr=None))
    assert reading.reader == "none" and NO_READER in reading.text and "320x120 pixels" in reading.text


def test_image_goes_to_the_vision_model() -> None:
    seen: list[ModelRequest] = []

    def vision(request: ModelRequest) -> str:
        seen.append(request)
        return "A readout showing B = 5.83 mT."

    model = FunctionModel(vision, name="vision")
    reading = asyncio.run(read_image_bytes("f.png", "png", png_with_text("B"), "what value?", vision=model, ocr=None))
    assert reading.reader == "vision" and "5.83 mT" in reading.text
    content = seen[0].messages[0]["content"]
    assert content[0]["text"] == "what value?" and content[1]["image_url"]["url"].startswith("data:image/png;base64,")


class FakeEngine:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, data: bytes) -> Any:
        self.calls += 1
        return SimpleNamespace(txts=("B = 5.83 mT", f"{len(data)} bytes"), scores=(0.9876543210123, 0.5))


@pytest.fixture
def ocr_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder: what an image reads as comes from the engine, not from a reading an
    earlier suite run kept on disk."""
    monkeypatch.setattr(images, "cache_dir", lambda: tmp_path / "cache")
    return tmp_path / "cache" / "ocr"


@pytest.fixture
def fake_engine(ocr_memory: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    """A counting stand-in for rapidocr, and no reading in memory (as in a fresh process)."""
    engine = FakeEngine()
    monkeypatch.setattr(OcrReader, "_engine", engine)
    monkeypatch.setattr(OcrReader, "_read", OrderedDict())
    return engine


@pytest.mark.skipif(not OcrReader.available(), reason="the 'ocr' extra (rapidocr) is not installed")
def test_offline_ocr_reads_text_and_numbers(ocr_memory: Path) -> None:
    data = png_with_text("Peak 12.4 mT")
    reading = asyncio.run(read_image_bytes("f.png", "png", data, "", vision=None, ocr=OcrReader()))
    assert reading.reader == "ocr" and "12.4" in reading.text and "320x120" in reading.text


@pytest.mark.skipif(not OcrReader.available(), reason="the 'ocr' extra (rapidocr) is not installed")
def test_the_ocr_engine_is_shared_and_an_image_read_before_is_not_read_again(
    ocr_memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = png_with_text("Peak 12.4 mT")
    first = OcrReader().read(seen)  # loads the engine (or finds it loaded by an earlier run)
    engine, calls = OcrReader._engine, list[bytes]()
    assert engine is not None

    def counting(data: bytes) -> Any:
        calls.append(data)
        return engine(data)

    monkeypatch.setattr(OcrReader, "_engine", counting)
    assert OcrReader().read(seen) == first and calls == []  # another run, the same image: not read again
    other = OcrReader().read(png_with_text("Field 3.0 mm"))
    assert len(calls) == 1 and any("3.0" in text for text, _ in other)  # a new image goes through the engine


def in_a_later_process(monkeypatch: pytest.MonkeyPatch, image: bytes) -> list[tuple[str, float]]:
    """The image read with nothing in memory, as by a later process (the engine stays: a fake)."""
    monkeypatch.setattr(OcrReader, "_read", OrderedDict())
    return OcrReader().read(image)


def test_a_reading_kept_on_disk_serves_a_later_process(
    ocr_memory: Path, fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = png_with_text("B")
    first = OcrReader().read(image)
    assert fake_engine.calls == 1 and len(list(ocr_memory.iterdir())) == 1
    assert in_a_later_process(monkeypatch, image) == first  # the same lines, scores to the last digit
    assert fake_engine.calls == 1
    monkeypatch.setattr(OcrReader, "_stack", ['{"rapidocr": "another version"}'])
    assert in_a_later_process(monkeypatch, image) == first and fake_engine.calls == 2  # another stack: read again
    assert len(list(ocr_memory.iterdir())) == 2


def test_a_reading_on_disk_that_cannot_be_read_back_is_read_again(
    ocr_memory: Path, fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = png_with_text("B")
    first = OcrReader().read(image)
    (kept,) = ocr_memory.iterdir()
    kept.write_text('{"lines": [["B", "not a score"]')  # cut short
    assert in_a_later_process(monkeypatch, image) == first and fake_engine.calls == 2
    kept.write_text(json.dumps({"lines": [["B = 5.83 mT", 0.98], ["5.83", "not a score"]]}))  # one line amiss
    assert in_a_later_process(monkeypatch, image) == first and fake_engine.calls == 3  # all of it again
    assert json.loads(kept.read_text())["lines"] == [list(line) for line in first]  # and kept again


def test_no_reading_is_kept_on_disk_when_switched_off(
    ocr_memory: Path, fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(images.DISK_SWITCH, "0")
    OcrReader().read(png_with_text("B"))
    assert not ocr_memory.exists()


def test_a_table_that_cannot_be_profiled_is_shown_as_text(tmp_path: Path) -> None:
    (tmp_path / "ragged.csv").write_text('a,b\n1,2\n"unterminated,3\n')
    outcome = reader(tmp_path).read("ragged.csv")
    assert outcome.mode == "text" and "could not be profiled as a table" in outcome.text and "a,b" in outcome.text
