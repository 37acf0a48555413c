"""Reading an image: a vision-capable model when one is configured; offline, the OCR extra
(rapidocr ships its ONNX models inside the wheel, so it needs no download); with neither, a
clear "no image reader configured" result. The image's pixel size is always reported."""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

from ...models.base import Model, ModelRequest

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
    content (the OCR is deterministic), so an image read before is not read again."""

    _engine: ClassVar[Any] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()
    _read: ClassVar[OrderedDict[str, list[tuple[str, float]]]] = OrderedDict()
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
            if cls._engine is None:
                logging.getLogger("RapidOCR").setLevel(logging.WARNING)
                from rapidocr import RapidOCR

                cls._engine = RapidOCR(params=ONE_THREAD)
                logging.getLogger("RapidOCR").setLevel(logging.WARNING)
            result = cls._engine(data)
            texts = getattr(result, "txts", None) or ()
            scores = getattr(result, "scores", None) or ()
            lines = [(str(t), float(s)) for t, s in zip(texts, scores, strict=False)]
            cls._read[key] = lines
            while len(cls._read) > cls.KEEP:
                cls._read.popitem(last=False)
            return list(lines)


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
