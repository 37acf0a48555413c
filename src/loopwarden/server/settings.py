"""What a server instance is allowed to do: where it binds, which folders users may point it at,
where run folders go, how many runs at once, and the upload limits."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

from ..errors import LoopwardenError

TOKEN_ENV = "LOOPWARDEN_TOKEN"


class UploadLimits(BaseModel):
    max_upload_bytes: int = 200 * 1024 * 1024
    """Bytes received in one request (all files together)."""
    max_files: int = 2000
    max_unpacked_bytes: int = 1024 * 1024 * 1024
    max_ratio: float = 100.0
    """Largest uncompressed/compressed ratio of a zip member (zip bombs go far past this)."""


class ServerSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = 8765
    db_path: Path = Path("loopwarden-runs/runs.db")
    runs_dir: Path = Path("loopwarden-runs/runs")
    """Each run gets runs_dir/<run id>/ with input/ (uploads) and out/ (outputs)."""
    allowed_roots: list[Path] = Field(default_factory=list)
    """Folders (and everything below them) that a run may read when started from a path."""
    max_concurrency: int = 2
    max_queue: int = 16
    """Runs waiting for a slot; beyond this a submission is answered 429 with Retry-After."""
    retry_after_s: int = 30
    token: SecretStr | None = None
    heartbeat_s: float = 15.0
    uploads: UploadLimits = Field(default_factory=UploadLimits)
    durable: bool = False
    """Runs are DBOS workflows (loopwarden.durable): they resume after a crash or restart."""
    database_url: str | None = None
    """With `durable`: a postgresql:// URL shared with `loopwarden worker` processes; None = SQLite
    files in the state folder (LOOPWARDEN_DATABASE_URL when not given)."""
    default_template: str = "lab"
    default_lang: str = "en"

    def requires_token(self) -> bool:
        return not is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class InsecureBinding(LoopwardenError, ValueError):
    pass


def check_binding(settings: ServerSettings) -> None:
    """Binding beyond loopback exposes runs to the network: refuse it without a bearer token."""
    if settings.requires_token() and (settings.token is None or not settings.token.get_secret_value()):
        raise InsecureBinding(f"binding {settings.host} needs a bearer token: set {TOKEN_ENV}")
