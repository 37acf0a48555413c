"""What the server runs for one submission. The job is a parameter of the app (tests inject a
scripted job); by default it is the report pipeline, imported lazily so the server module loads
even where the report extra is not installed."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, SecretStr

from ..errors import LoopwardenError
from ..events import Event

if TYPE_CHECKING:
    from ..policy.approval import ApprovalGate


class Job(Protocol):
    def __call__(self, config: Any, /, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]: ...


class ModelSettings(BaseModel):
    """Model endpoint choices a user may make per run. API keys come from the server's own
    environment or config file unless given here; they are never stored with the run."""

    preset: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None

    def empty(self) -> bool:
        return not (self.preset or self.base_url or self.model or self.api_key)


class RunRequest(BaseModel):
    data_dir: Path
    out_dir: Path
    template: str = "lab"
    lang: Literal["en", "zh"] = "en"
    strict: bool = False
    approve_code: bool = False
    """Each figure's model-written code waits for a decision at the approvals endpoint."""
    model: ModelSettings = ModelSettings()

    def public_params(self, source: str) -> dict[str, Any]:
        return {
            "source": source,
            "template": self.template,
            "lang": self.lang,
            "strict": self.strict,
            "approve_code": self.approve_code,
            "model": self.model.model_dump(exclude={"api_key"}, exclude_none=True),
        }


class InvalidRun(LoopwardenError, ValueError):
    """The run cannot start (bad folder, template, model settings): answered 400 at submission."""


def build_job_config(request: RunRequest) -> Any:
    """The report pipeline's `ReportConfig` when that pipeline is installed, else the request itself
    (what injected test jobs receive)."""
    if not report_installed():
        return request
    # report.config, not the pipeline: a server running another job (`--job`) would import pandas
    # and the rest of the pipeline (about 0.5 s of CPU) only to build this; the report job has them.
    report_config = importlib.import_module("loopwarden.report.config")
    endpoint = None
    if not request.model.empty():
        config_module = importlib.import_module("loopwarden.models.config")
        api_key = request.model.api_key.get_secret_value() if request.model.api_key else None
        try:
            endpoint = config_module.load_endpoint_config(
                preset=request.model.preset, base_url=request.model.base_url, api_key=api_key, model=request.model.model
            )
        except ValueError as error:
            raise InvalidRun(str(error)) from error
    config = report_config.ReportConfig(
        data_dir=request.data_dir,
        out_dir=request.out_dir,
        template=request.template,
        lang=request.lang,
        endpoint=endpoint,
        strict=request.strict,
        approve_code=request.approve_code,
    )
    try:
        report_config.validate_report_config(config)
    except ValueError as error:  # ReportInputError is one: a request that cannot run, nothing written
        raise InvalidRun(str(error)) from error
    return config


def report_installed() -> bool:
    """Whether the report pipeline imports, asked without importing it: beyond the core
    dependencies it needs only pandas (the report extra) at import (tests/test_server_api.py)."""
    return importlib.util.find_spec("pandas") is not None


def report_job() -> Job:
    return run_report


async def run_report(
    config: Any, /, *, run_id: str | None = None, start_seq: int = 0, approvals: ApprovalGate | None = None
) -> AsyncIterator[Event]:
    """The report pipeline as the server's job, imported at the first run, not at start: a server
    or app window that has run no report yet has not paid for pandas and the pipeline's imports
    (about 0.6 s of CPU). A module-level function, so durable runs can name it for workers."""
    pipeline = importlib.import_module("loopwarden.report.pipeline")
    events = pipeline.run_report(config, run_id=run_id, start_seq=start_seq, approvals=approvals)
    try:
        async for event in events:
            yield event
    finally:
        await events.aclose()  # the pipeline's cleanup (temp files, subprocesses) runs now, not at GC


def load_job(spec: str) -> Job:
    """`module:attribute` -> the job function (for `loopwarden serve --job`)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"job must be module:function, got {spec!r}")
    job: Job = getattr(importlib.import_module(module_name), attribute)
    return job


ConfigBuilder = Callable[[RunRequest], Any]
