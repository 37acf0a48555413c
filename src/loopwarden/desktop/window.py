"""The native window (Qt WebEngine through PySide6): the page of the embedded server, with the
per-launch token added to each of its requests to that server (never in a URL, a cookie or the
page's reach), the native folder dialog, the system's viewer for PDFs and folders, and a close
that stops the server after ending the runs still going."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QStandardPaths, Qt, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QKeySequence, QShortcut
from PySide6.QtWebEngineCore import (
    QWebEngineDownloadRequest,
    QWebEnginePage,
    QWebEngineProfile,
    QWebEngineSettings,
    QWebEngineUrlRequestInfo,
    QWebEngineUrlRequestInterceptor,
)
from PySide6.QtWebEngineWidgets import QWebEngineView
from PySide6.QtWidgets import QApplication, QFileDialog, QMainWindow

from .embedded import EmbeddedServer, app_settings
from .focus import take_focus
from .instance import Instance
from .rendering import choose_renderer

TITLE = "loopwarden"
FOLDER_DIALOG_TITLE = "Choose the data folder"
_CALL_TIMEOUT_S = 30.0


class QtShell(QObject):
    """The routes' `Shell`: called on the server's thread, carried out on the window's."""

    pick_requested = Signal(object)
    open_requested = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.window: QMainWindow | None = None
        self.pick_requested.connect(self._pick, Qt.ConnectionType.QueuedConnection)
        self.open_requested.connect(self._open, Qt.ConnectionType.QueuedConnection)

    async def pick_folder(self, start: Path | None) -> Path | None:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Path | None] = loop.create_future()

        def settle(folder: Path | None) -> None:
            if not answer.done():
                answer.set_result(folder)

        def done(folder: Path | None) -> None:
            loop.call_soon_threadsafe(settle, folder)

        self.pick_requested.emit((start, done))
        return await answer

    def open_path(self, path: Path) -> bool:
        finished = threading.Event()
        result: list[bool] = []
        self.open_requested.emit((path, result, finished))
        finished.wait(_CALL_TIMEOUT_S)
        return bool(result and result[0])

    @Slot(object)
    def _pick(self, request: tuple[Path | None, Callable[[Path | None], None]]) -> None:
        start, done = request
        chosen = QFileDialog.getExistingDirectory(self.window, FOLDER_DIALOG_TITLE, str(start or Path.cwd()))
        done(Path(chosen) if chosen else None)

    @Slot(object)
    def _open(self, request: tuple[Path, list[bool], threading.Event]) -> None:
        path, result, finished = request
        try:
            result.append(QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))))
        finally:
            finished.set()


class TokenInterceptor(QWebEngineUrlRequestInterceptor):
    """Adds `Authorization: Bearer <token>` to requests for the embedded server, and only those."""

    def __init__(self, port: int, token: str, parent: QObject) -> None:
        super().__init__(parent)
        self._port = port
        self._header = f"Bearer {token}".encode()

    def interceptRequest(self, info: QWebEngineUrlRequestInfo) -> None:
        url = info.requestUrl()
        if url.scheme() == "http" and url.host() == "127.0.0.1" and url.port() == self._port:
            info.setHttpHeader(b"Authorization", self._header)


class Page(QWebEnginePage):
    """Stays on the embedded server: links elsewhere open in the system's browser."""

    def __init__(self, profile: QWebEngineProfile, port: int, parent: QObject) -> None:
        super().__init__(profile, parent)
        self._port = port

    def acceptNavigationRequest(self, url: QUrl | str, kind: QWebEnginePage.NavigationType, main: bool) -> bool:
        target = QUrl(url)
        if target.scheme() in ("http", "https") and not (target.host() == "127.0.0.1" and target.port() == self._port):
            if main and target.scheme() in ("http", "https"):
                QDesktopServices.openUrl(target)
            return False
        return super().acceptNavigationRequest(url, kind, main)


class Window(QMainWindow):
    raise_requested = Signal()

    def __init__(self, server: EmbeddedServer) -> None:
        super().__init__()
        self.server = server
        self.setWindowTitle(TITLE)
        self.resize(1200, 860)
        self.profile = QWebEngineProfile(self)  # off the record: nothing of a launch is kept on disk
        self.interceptor = TokenInterceptor(server.port, server.token, self)
        self.profile.setUrlRequestInterceptor(self.interceptor)
        self.profile.downloadRequested.connect(self._download)
        self.view = QWebEngineView(self)
        self.page = Page(self.profile, server.port, self.view)
        for attribute in (
            QWebEngineSettings.WebAttribute.PluginsEnabled,
            QWebEngineSettings.WebAttribute.PdfViewerEnabled,
        ):
            self.page.settings().setAttribute(attribute, True)
        self.view.setPage(self.page)
        self.setCentralWidget(self.view)
        QShortcut(QKeySequence("Ctrl+Q"), self, self.close)
        self.raise_requested.connect(self.bring_to_front, Qt.ConnectionType.QueuedConnection)
        self.view.load(QUrl(server.url))

    @Slot()
    def bring_to_front(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()
        if QApplication.platformName() == "xcb":
            take_focus(int(self.winId()))  # Qt's own request may carry a stale time: see focus.py
        print("loopwarden: another launch asked for this window; brought it to the front", file=sys.stderr, flush=True)

    def _download(self, download: QWebEngineDownloadRequest) -> None:
        folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DownloadLocation) or str(Path.home())
        download.setDownloadDirectory(folder)
        download.accept()


def run_window(state_dir: Path, instance: Instance, *, concurrency: int = 2, job: Any = None) -> int:
    """Start the server, show the window, and when it closes end the runs and stop the server."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")  # Chromium's sandbox refuses root
    os.environ.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--log-level=3")
    choose_renderer()  # before Qt starts: Qt Quick reads its renderer once
    application = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(application, QApplication)
    application.setApplicationName(TITLE)
    application.setQuitOnLastWindowClosed(True)
    shell = QtShell()
    server = EmbeddedServer(app_settings(state_dir, concurrency=concurrency), shell, job)
    server.start()
    print(f"loopwarden: app serving on {server.url} (runs in {state_dir})", file=sys.stderr, flush=True)
    window = Window(server)
    shell.window = window
    instance.on_raise(window.raise_requested.emit, server.url)
    stop = _quit_on_signals(application)
    window.show()
    try:
        code = application.exec()
    finally:
        stop()
        cancelled = server.stop()
        if cancelled:
            print(f"loopwarden: cancelled {len(cancelled)} run(s) as the window closed", file=sys.stderr, flush=True)
        # The page goes before its profile (a child of the window), or Chromium warns of trouble.
        shiboken6.delete(window.page)
        shiboken6.delete(window)
    print("loopwarden: app closed", file=sys.stderr, flush=True)
    return int(code)


def _quit_on_signals(application: QApplication) -> Callable[[], None]:
    """Ctrl-C in the terminal or a TERM close the window as its close button would (runs cancelled,
    server stopped). Qt's loop holds Python's signal handlers until Python code runs: a timer lets it."""
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    for number in previous:
        signal.signal(number, lambda *_: application.quit())
    timer = QTimer()
    timer.timeout.connect(lambda: None)
    timer.start(200)

    def restore() -> None:
        timer.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)

    return restore
