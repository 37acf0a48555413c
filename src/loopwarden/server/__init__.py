"""`loopwarden serve`: report runs as a service. FastAPI app (`app.create_app`), background
runner with bounded concurrency (`runner`), resumable Server-Sent Events (`sse`), safe uploads
(`uploads`) and a static web page (`static/`, no build step). Runs live in the SQLite run store
(`loopwarden.trace.store`), so nothing is lost when a client or the server goes away."""

from .settings import ServerSettings

__all__ = ["ServerSettings"]
