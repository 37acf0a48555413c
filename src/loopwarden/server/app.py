"""The FastAPI app: `create_app(settings, job=...)`. The job is a parameter so tests can inject a
scripted job; by default it is the report pipeline. OpenAPI docs at /docs, served offline (docs.py)."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from sse_starlette import EventSourceResponse

from ..trace.store import RunRecord, RunStore, new_run_id
from .artifacts import artifact_response, list_outputs
from .docs import mount_docs
from .errors import one_line_validation_error
from .events import RunQueued
from .jobs import ConfigBuilder, InvalidRun, Job, RunRequest, build_job_config, report_job
from .runner import QueueFull, Runner
from .security import COOKIE, SecurityHeaders, require_token, token_matches
from .settings import ServerSettings
from .sse import BadLastEventId, parse_last_event_id, run_event_frames
from .submissions import allowed_folders, read_submission, resolve_folder, unpack_uploads
from .uploads import UploadRejected

STATIC = Path(__file__).parent / "static"
MAX_OFFSET = 2**62  # inside SQLite's INTEGER range
_RUN_ID = re.compile(r"[0-9a-f]{32}")


class Decision(BaseModel):
    decision: Literal["approve", "deny"]
    note: str = ""
    by: str | None = None


class Login(BaseModel):
    token: str


def create_app(
    settings: ServerSettings, job: Job | None = None, *, config_builder: ConfigBuilder = build_job_config
) -> FastAPI:
    runner: Runner
    if settings.durable:  # runs resume after a crash (durable/, the `durable` extra, loaded only here)
        from ..durable.database import Database
        from ..durable.service import durable_runner

        database = Database.resolve(settings.db_path.parent, settings.database_url)
        store, runner = durable_runner(settings, job if job is not None else report_job(), database)
    else:
        store = RunStore(settings.db_path)
        store.mark_interrupted_on_start()
        runner = Runner(store, job if job is not None else report_job(), settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await runner.shutdown()

    app = FastAPI(title="loopwarden", summary="Report runs as a service", lifespan=lifespan, docs_url=None)
    app.state.settings, app.state.store, app.state.runner = settings, store, runner
    app.add_middleware(SecurityHeaders)
    app.exception_handler(RequestValidationError)(one_line_validation_error)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    mount_docs(app)
    api = [Depends(require_token)]

    def run_or_404(run_id: str) -> RunRecord:
        run = store.find_run(run_id) if _RUN_ID.fullmatch(run_id) else None
        if run is None:
            raise HTTPException(404, "no such run")
        return run

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/api/health")
    def health() -> dict[str, Any]:
        return {"ok": True, "auth_required": settings.token is not None, "active_runs": runner.active}

    @app.post("/api/login")
    def login(body: Login, response: Response) -> dict[str, bool]:
        if settings.token is None or not token_matches(settings, body.token):
            raise HTTPException(401, "wrong token")
        response.set_cookie(COOKIE, body.token, httponly=True, samesite="strict")
        return {"ok": True}

    @app.get("/api/folders", dependencies=api)
    def folders() -> list[dict[str, str]]:
        return allowed_folders(settings)

    @app.post("/api/runs", dependencies=api, status_code=202)
    async def submit_run(request: Request) -> JSONResponse:
        # Refuse early when full, before receiving an upload; re-checked when the run is reserved.
        if runner.active >= settings.max_concurrency + settings.max_queue:
            return _too_many(settings.retry_after_s)
        length = request.headers.get("content-length", "")
        if not length.isdigit() and request.headers.get("content-type", "").startswith("multipart/"):
            # Without a declared length the form parser would spool any amount to disk first.
            raise HTTPException(411, "uploads need a Content-Length")
        if length.isdigit() and int(length) > settings.uploads.max_upload_bytes + 1024 * 1024:
            raise HTTPException(413, f"upload larger than {settings.uploads.max_upload_bytes} bytes")
        run_id = new_run_id()
        run_dir = settings.runs_dir / run_id
        try:
            submission, uploads = await read_submission(request)
            if uploads:
                written = unpack_uploads(uploads, run_dir / "input", settings)
                data_dir, source = run_dir / "input", f"upload ({len(written)} files)"
            elif submission.folder:
                data_dir = resolve_folder(submission.folder, settings.allowed_roots)
                source = str(data_dir)
            else:
                raise InvalidRun("give a folder or upload files")
            (run_dir / "out").mkdir(parents=True, exist_ok=True)
            run_request = RunRequest(
                data_dir=data_dir,
                out_dir=run_dir / "out",
                template=submission.template,
                lang=submission.lang,
                strict=submission.strict,
                approve_code=submission.approve_code,
                model=submission.model,
            )
            config = config_builder(run_request)
            runner.submit(run_id, config)
        except (InvalidRun, UploadRejected, ValueError, QueueFull) as error:
            shutil.rmtree(run_dir, ignore_errors=True)
            if isinstance(error, QueueFull):
                return _too_many(error.retry_after)
            status = error.status if isinstance(error, UploadRejected) else 400
            raise HTTPException(status, str(error)) from error
        except OSError as error:  # disk full, permissions: nothing half-made is left behind
            shutil.rmtree(run_dir, ignore_errors=True)
            raise HTTPException(500, f"could not prepare the run folder: {error.strerror or error}") from error
        # No await since submit(): the run's task has not started, so the row exists before it does.
        params = run_request.public_params(source)
        store.create_run(run_id=run_id, params=params, data_dir=data_dir, out_dir=run_dir / "out")
        runner.record(run_id, RunQueued(run_id=run_id, seq=1, ts=store.get_run(run_id).created_at, params=params))
        return JSONResponse(
            {"id": run_id, "status": "queued", "url": f"/api/runs/{run_id}", "events": f"/api/runs/{run_id}/events"},
            status_code=202,
        )

    @app.get("/api/runs", dependencies=api)
    def list_runs(
        limit: int = Query(50, ge=1, le=500),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
        status: str | None = Query(None, max_length=64),
    ) -> list[RunRecord]:
        return store.list_runs(limit=limit, offset=offset, status=status)

    @app.get("/api/runs/{run_id}", dependencies=api)
    def get_run(run_id: str) -> dict[str, Any]:
        run = run_or_404(run_id)
        return {
            **run.model_dump(),
            "approvals": [a.model_dump() for a in store.approvals(run.id)],
            "artifacts": list_outputs(run),
        }

    @app.post("/api/runs/{run_id}/cancel", dependencies=api, status_code=202)
    def cancel_run(run_id: str) -> dict[str, Any]:
        run = run_or_404(run_id)
        if run.finished:
            raise HTTPException(409, f"run already {run.status}")
        if not runner.cancel(run.id):
            # Active in the store but not executing here (left over): end it where it stands.
            store.set_status(run.id, "cancelled", message="cancelled by request", stop_reasons=["cancelled"])
        return {"id": run.id, "cancelling": True}

    @app.get("/api/runs/{run_id}/artifacts", dependencies=api)
    def artifacts(run_id: str) -> list[dict[str, object]]:
        return list_outputs(run_or_404(run_id))

    @app.get("/api/runs/{run_id}/artifacts/{name:path}", dependencies=api)
    def artifact(run_id: str, name: str, download: bool = False) -> Response:
        return artifact_response(store, run_or_404(run_id), name, download=download)

    @app.get("/api/runs/{run_id}/approvals", dependencies=api)
    def approvals(run_id: str) -> list[dict[str, Any]]:
        return [a.model_dump() for a in store.approvals(run_or_404(run_id).id)]

    @app.post("/api/runs/{run_id}/approvals/{call_id}", dependencies=api)
    def decide(run_id: str, call_id: str, body: Decision) -> dict[str, Any]:
        run = run_or_404(run_id)
        existing = store.approval(run.id, call_id)
        if existing is None:
            raise HTTPException(404, "no such approval")
        if not runner.decide(run.id, call_id, approve=body.decision == "approve", by=body.by, note=body.note):
            current = store.approval(run.id, call_id)
            raise HTTPException(409, f"already {current.status if current else 'decided'}")
        decided = store.approval(run.id, call_id)
        return decided.model_dump() if decided else {}

    @app.get("/api/runs/{run_id}/events", dependencies=api)
    def events(run_id: str, request: Request, after: str | None = None) -> EventSourceResponse:
        run = run_or_404(run_id)
        header = request.headers.get("last-event-id")
        try:
            after_seq = parse_last_event_id(header if header is not None else after, run.last_seq)
        except BadLastEventId as error:
            raise HTTPException(error.status, str(error)) from error
        frames = run_event_frames(store, runner.signals, run.id, after_seq)
        return EventSourceResponse(frames, ping=settings.heartbeat_s, headers={"Cache-Control": "no-store"})

    return app


def _too_many(retry_after: int) -> JSONResponse:
    return JSONResponse(
        {"detail": "too many runs queued; retry later"}, status_code=429, headers={"Retry-After": str(retry_after)}
    )
