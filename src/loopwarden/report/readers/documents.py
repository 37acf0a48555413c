"""Turning documents into text: PDF (pypdf), DOCX (python-docx), IPYNB (cells and outputs),
JSON/YAML. Plain text, Markdown and LaTeX are read directly by lines (see text.py)."""

from __future__ import annotations

import io
import json
from typing import Any, BinaryIO

MAX_DOCUMENT_BYTES = 200 << 20


def _read_all(f: BinaryIO) -> bytes:
    data = f.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"document larger than {MAX_DOCUMENT_BYTES >> 20} MB; not converted")
    return data


def pdf_text(f: BinaryIO) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(_read_all(f)))
    pages = []
    for number, page in enumerate(reader.pages, start=1):
        pages.append(f"--- page {number} of {len(reader.pages)} ---\n{(page.extract_text() or '').strip()}\n")
    return "\n".join(pages)


def docx_text(f: BinaryIO) -> str:
    import docx

    document = docx.Document(io.BytesIO(_read_all(f)))
    parts = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = paragraph.style.name if paragraph.style is not None else ""
        parts.append(f"# {text}" if style.startswith("Heading") else text)
    for number, table in enumerate(document.tables, start=1):
        parts.append(f"--- table {number} ---")
        for row in table.rows:
            parts.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n".join(parts) + "\n"


def ipynb_text(f: BinaryIO) -> str:
    notebook = json.loads(_read_all(f).decode("utf-8", errors="replace"))
    parts = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        kind = cell.get("cell_type", "cell")
        parts.append(f"--- [{number}] {kind} ---")
        parts.append(_joined(cell.get("source", "")))
        for output in cell.get("outputs", []) or []:
            parts.append(_output_text(output))
    return "\n".join(p for p in parts if p) + "\n"


def _joined(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _output_text(output: dict[str, Any]) -> str:
    if output.get("output_type") == "stream":
        return "[output]\n" + _joined(output.get("text", ""))
    if output.get("output_type") == "error":
        return f"[error] {output.get('ename', '')}: {output.get('evalue', '')}"
    data = output.get("data", {})
    text = "[output]\n" + _joined(data["text/plain"]) if "text/plain" in data else ""
    images = [k for k in data if k.startswith("image/")]
    if images:
        text += f"\n[image output: {', '.join(images)}]"
    return text


def json_text(f: BinaryIO) -> str:
    raw = _read_all(f).decode("utf-8", errors="replace")
    try:
        return json.dumps(json.loads(raw), indent=1, ensure_ascii=False) + "\n"
    except json.JSONDecodeError as error:
        return f"[not valid JSON: {error}; shown as text]\n{raw}"


CONVERTERS = {"pdf": pdf_text, "docx": docx_text, "ipynb": ipynb_text, "json": json_text}
