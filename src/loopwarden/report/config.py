"""What a report run is asked to do, and the up-front check of that request.

`validate_report_config` is called by the CLI and the server before anything is written, so
bad input is a one-line error and never a half-written output folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..errors import LoopwardenError
from ..models.config import EndpointConfig
from .templates import TemplateError, load_template

DRAFT_ATTEMPTS = 3
"""Drafts asked of the model by default before the offline writer's report is used (`draft_attempts`)."""


class ReportInputError(LoopwardenError, ValueError):
    """The request cannot be run; the message is one line for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ReportConfig(BaseModel):
    data_dir: Path
    out_dir: Path
    template: str = "lab"
    """A built-in template name or the path of a template directory."""
    lang: Literal["en", "zh"] = "en"
    endpoint: EndpointConfig | None = None
    """None = offline: the deterministic explorer and writer, no network."""
    strict: bool = False
    """Fail (rather than degrade) when exploration is cut off or no valid draft is produced."""
    allow_rlimits_only: bool = False
    approve_code: bool = False
    """Each `make_figure` call (model-written code) waits for a person's approval (an ApprovalGate
    given to run_report); with no gate every such call is denied."""
    pdf: bool = True
    """Compile with xelatex when it is installed; False = the .tex is the deliverable."""
    compile_timeout: float = 180.0
    """Seconds for one xelatex or bibliography-tool pass."""
    draft_attempts: int = Field(DRAFT_ATTEMPTS, ge=1)
    """Drafts asked of the model (each rejected one told why) before the offline writer's report is
    used, or the run fails under `strict` (`--draft-attempts`)."""


def validate_report_config(config: ReportConfig) -> None:
    """Raise ReportInputError for a request that cannot run; write nothing."""
    _check_data_dir(config.data_dir)
    _check_out_dir(config.out_dir, config.data_dir)
    try:
        load_template(config.template)
    except TemplateError as error:
        raise ReportInputError(str(error)) from None


def _check_data_dir(data_dir: Path) -> None:
    if not data_dir.exists():
        raise ReportInputError(f"data folder does not exist: {data_dir}")
    if not data_dir.is_dir():
        raise ReportInputError(f"not a folder: {data_dir} (give the folder that holds the data)")
    try:
        has_file = any(_visible_files(data_dir))
    except PermissionError:
        raise ReportInputError(f"data folder cannot be read: {data_dir}") from None
    if not has_file:
        raise ReportInputError(f"data folder is empty: {data_dir}")


def _visible_files(root: Path) -> Iterator[Path]:
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith("."):
                yield Path(directory) / name


def _can_write_in(directory: Path) -> bool:
    # os.access says yes to root even on a read-only mount; a real probe file does not lie.
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def _check_out_dir(out_dir: Path, data_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportInputError(f"output path exists and is not a folder: {out_dir}")
    existing = out_dir.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not _can_write_in(existing):
        raise ReportInputError(f"output folder is not writable: {out_dir}")
    if out_dir.resolve() == data_dir.resolve():
        raise ReportInputError("output folder must not be the data folder itself")
    if out_dir.resolve().is_relative_to(data_dir.resolve()):
        raise ReportInputError("output folder must not be inside the data folder (the next run would read it as data)")
