"""Where durable runs live. Unset, `LOOPWARDEN_DATABASE_URL` means the embedded default: the run
store (`<state dir>/runs.db`) and DBOS's system database (`<state dir>/dbos.sqlite`) are SQLite
files, and one `loopwarden serve` process runs everything. Set to `postgresql://...`, both move to
that Postgres database (DBOS's tables in its own `dbos` schema), shared by `loopwarden serve` API
processes and any number of `loopwarden worker` processes.

A wrong URL or an unreachable server is found here, at start-up, and said in one line
(`DatabaseError`), with any password in the URL masked."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..trace.store import RunStore

DATABASE_URL_ENV = "LOOPWARDEN_DATABASE_URL"
CONNECT_TIMEOUT_S = 5
_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


class DatabaseError(Exception):
    """The database cannot be used: the message is one line, meant for the person starting us."""


def redact(url: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


@dataclass(frozen=True)
class Database:
    url: str | None
    """A Postgres URL, or None for the embedded SQLite files in `state_dir`."""
    state_dir: Path

    @classmethod
    def resolve(cls, state_dir: Path, url: str | None = None) -> Database:
        url = url if url is not None else os.environ.get(DATABASE_URL_ENV, "")
        url = url.strip() or None
        if url is not None and not url.startswith(_SCHEMES):
            raise DatabaseError(
                f"{DATABASE_URL_ENV} must be a postgresql://user@host:port/database URL, got {redact(url)!r}"
            )
        return cls(url, state_dir)

    @property
    def postgres(self) -> bool:
        return self.url is not None

    @property
    def libpq_url(self) -> str:
        assert self.url is not None
        return re.sub(r"^postgres(ql)?(\+psycopg)?://", "postgresql://", self.url)

    @property
    def system_url(self) -> str:
        """DBOS's system database (SQLAlchemy URL)."""
        if self.url is None:
            return f"sqlite:///{(self.state_dir / 'dbos.sqlite').resolve()}"
        return self.libpq_url

    def describe(self) -> str:
        return redact(self.libpq_url) if self.url else f"SQLite in {self.state_dir}"

    def check(self) -> None:
        """Connect once, bounded by CONNECT_TIMEOUT_S: DatabaseError when that fails."""
        if self.url is None:
            try:
                self.state_dir.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise DatabaseError(f"cannot create the state folder {self.state_dir}: {error.strerror}") from None
            return
        try:
            import psycopg
        except ModuleNotFoundError:
            raise DatabaseError("Postgres needs the durable extra: pip install 'loopwarden[durable]'") from None
        try:
            psycopg.connect(self.libpq_url, connect_timeout=CONNECT_TIMEOUT_S).close()
        except (psycopg.Error, ValueError) as error:
            reason = " ".join(str(error).split()) or type(error).__name__
            raise DatabaseError(f"cannot use the database {self.describe()} ({DATABASE_URL_ENV}): {reason}") from None

    def open_store(self) -> RunStore:
        if self.url is None:
            from ..trace.store import RunStore

            return RunStore(self.state_dir / "runs.db")
        from ..trace.pgstore import PostgresRunStore

        return PostgresRunStore(self.libpq_url)
