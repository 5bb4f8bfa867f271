"""A loopback web server for a folder of pages (the bench's `{site}` and the tests)."""

from __future__ import annotations

import functools
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from tiny_cli.errors import ConfigError


class PageServer:
    """Serve `folder` read-only on 127.0.0.1 at a free port while the context is open."""

    def __init__(self, folder: Path) -> None:
        if not folder.is_dir():
            raise ConfigError(f"pages folder {folder} does not exist")
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self._httpd = LoopbackServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. http://127.0.0.1:40123."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> PageServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class LoopbackServer(ThreadingHTTPServer):
    """A threaded server that never waits for its handlers and ignores clients that hung up.

    A client that gives up (a size cap, a timeout) is normal here; its broken pipe must not
    print a traceback onto whatever stderr is current in another thread.
    """

    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Keep request logs off stderr: the CLI's stderr belongs to the user."""
