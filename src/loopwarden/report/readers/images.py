"""Reading an image: a vision-capable model when one is configured; offline, the OCR extra
(rapidocr ships its ONNX models inside the wheel, so it needs no download); with neither, a
clear "no image reader configured" result. The image's pixel size is always reported."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import logging
import os
import platform
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...models.base import Model, ModelRequest
from ..cachedir import cache_dir, write_atomically

MAX_IMAGE_BYTES = 20 << 20
NO_READER = "no image reader configured"
# onnxruntime's default thread pools (one thread a core) spin while waiting for work: on a 2-core
# machine that was about 0.5 s of CPU more per process for the same text (2.10-2.31 s instead of
# 2.55-2.88 s for examples/field-scan's screenshot in a fresh process, 4 runs each taking turns,
# identical lines and scores). One image is read at a time
# through the one engine (the lock below), and `loopwarden serve` runs several reports at once,
# so the calling thread alone does the work.
ONE_THREAD = {
    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
}
# What an image read as is also kept on disk (cachedir.py), per image and OCR stack (_ocr_stack:
# versions, machine, settings), so a reading is only ever reused where the engine would give it
# again. A report run again on a folder, as a user does while working on it, then neither imports
# rapidocr nor runs it for an image it read: about 3 s of CPU for examples/field-scan's
# screenshot (1.5 s import, 1.5 s reading).
# LOOPWARDEN_OCR_CACHE=0 keeps readings in memory only.
DISK_SWITCH = "LOOPWARDEN_OCR_CACHE"
KEEP_ON_DISK = 4096
_MIME = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


@dataclass
class ImageReading:
    text: str
    width: int | None
    height: int | None
    reader: str
    """vision | ocr | none."""


def image_size(data: bytes) -> tuple[int | None, int | None]:
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            return int(image.size[0]), int(image.size[1])
    except Exception:  # not an image Pillow knows: the size is simply unknown
        return None, None


class OcrReader:
    """rapidocr, loaded on first use and then shared by every run of this process (loading it
    costs seconds: `loopwarden serve` runs many reports). What an image reads as is kept per
    content (the OCR is deterministic), so an image read before is not read again: in memory for
    this process, on disk for later ones."""

    _engine: ClassVar[Any] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()
    _read: ClassVar[OrderedDict[str, list[tuple[str, float]]]] = OrderedDict()
    _stack: ClassVar[list[str | None]] = []
    KEEP: ClassVar[int] = 64

    @staticmethod
    def available() -> bool:
        import importlib.util

        return importlib.util.find_spec("rapidocr") is not None and importlib.util.find_spec("onnxruntime") is not None

    def read(self, data: bytes) -> list[tuple[str, float]]:
        key = hashlib.sha256(data).hexdigest()
        cls = OcrReader
        with cls._lock:  # one image at a time through the one engine
            if key in cls._read:
                cls._read.move_to_end(key)
                return list(cls._read[key])
            kept = _on_disk(key)
            lines = _recall(kept) if kept is not None else None
            if lines is None:
                lines = cls._run_engine(data)
                if kept is not None:
                    _keep(kept, lines)
            cls._read[key] = lines
            while len(cls._read) > cls.KEEP:
                cls._read.popitem(last=False)
            return list(lines)

    @classmethod
    def _run_engine(cls, data: bytes) -> list[tuple[str, float]]:
        if cls._engine is None:
            logging.getLogger("RapidOCR").setLevel(logging.WARNING)
            from rapidocr import RapidOCR

            cls._engine = RapidOCR(params=ONE_THREAD)
            logging.getLogger("RapidOCR").setLevel(logging.WARNING)
        result = cls._engine(data)
        texts = getattr(result, "txts", None) or ()
        scores = getattr(result, "scores", None) or ()
        return [(str(t), float(s)) for t, s in zip(texts, scores, strict=False)]


def _ocr_stack() -> str | None:
    """What a reading depends on besides the image: the versions of rapidocr, onnxruntime and what
    rapidocr requires (opencv's resizing, numpy, shapely's box geometry, ...), the machine and the
    engine's settings. None when rapidocr's or onnxruntime's version cannot be told."""
    if not OcrReader._stack:
        from importlib import metadata

        try:
            names = ["rapidocr", "onnxruntime"]
            required = [r for r in metadata.requires("rapidocr") or [] if ";" not in r]
            names += sorted(m.group() for r in required if (m := re.match(r"[A-Za-z0-9._-]+", r)))
            versions = {name: metadata.version(name) for name in names[:2]}
            for name in names[2:]:
                with contextlib.suppress(metadata.PackageNotFoundError):
                    versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            OcrReader._stack.append(None)
        else:
            OcrReader._stack.append(json.dumps([versions, platform.machine(), ONE_THREAD], sort_keys=True))
    return OcrReader._stack[0]


def _on_disk(image: str) -> Path | None:
    """Where the reading of the image with sha256 `image` is kept; None when not kept on disk."""
    folder = cache_dir()
    stack = _ocr_stack()
    if os.environ.get(DISK_SWITCH, "1") == "0" or folder is None or stack is None:
        return None
    name = hashlib.sha256(f"{stack}\n{image}".encode()).hexdigest()
    return folder / "ocr" / f"{name}.json"


def _recall(path: Path) -> list[tuple[str, float]] | None:
    """The reading kept at `path`, whole; None when there is none or any of it is not a line."""
    try:
        lines = json.loads(path.read_text(encoding="utf-8"))["lines"]
        if all(isinstance(t, str) and isinstance(s, int | float) for t, s in lines):
            return [(t, float(s)) for t, s in lines]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _keep(path: Path, lines: list[tuple[str, float]]) -> None:
    if not write_atomically(path, json.dumps({"lines": lines})):
        return
    try:
        kept = list(path.parent.iterdir())
        if len(kept) > KEEP_ON_DISK:  # the oldest readings go first
            kept.sort(key=lambda p: p.stat().st_mtime)
            for old in kept[: len(kept) - KEEP_ON_DISK]:
                old.unlink(missing_ok=True)
    except OSError:  # another process pruned at the same time
        pass


async def read_image_bytes(
    rel: str, ext: str, data: bytes, question: str, *, vision: Model | None, ocr: OcrReader | None
) -> ImageReading:
    width, height = image_size(data)
    size = f"{width}x{height} pixels" if width else "size unknown"
    if vision is not None:
        url = f"data:{_MIME.get(ext, 'image/png')};base64,{base64.b64encode(data).decode()}"
        content = [
            {"type": "text", "text": question or "Describe this image: what it shows, any text and numbers."},
            {"type": "image_url", "image_url": {"url": url}},
        ]
        reply = await vision.complete(ModelRequest(messages=[{"role": "user", "content": content}]))
        return ImageReading(f"{rel} ({size}), read by {vision.name}:\n{reply.text or ''}", width, height, "vision")
    if ocr is not None:
        import asyncio

        lines = await asyncio.to_thread(ocr.read, data)
        found = "\n".join(f"{t}  (confidence {s:.2f})" for t, s in lines) or "(no text found)"
        text = f"{rel} ({size}). Offline OCR (rapidocr) text, no visual description:\n{found}"
        return ImageReading(text, width, height, "ocr")
    text = f"{NO_READER}: {rel} is an image of {size}; configure a vision model or install the 'ocr' extra."
    return ImageReading(text, width, height, "none")
