"""A TCP server on 127.0.0.1 that accepts connections and never answers.

What a hung model server or GitLab looks like from a client: the connection is made, the
request is sent, and no byte ever comes back. Used to check that every check of
``reviewbot doctor`` gives up within its timeout::

    with SilentServer() as silent:
        settings = Settings(llm_base_url=f"{silent.url}/v1", ...)
"""

from __future__ import annotations

import contextlib
import socket
import threading

ACCEPT_POLL_S = 0.05
LISTEN_BACKLOG = 64


class SilentServer:
    """Accepts every connection, reads nothing back to the client, holds it until stopped."""

    def __init__(self) -> None:
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.accepted = 0

    def start(self) -> SilentServer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(LISTEN_BACKLOG)
        listener.settimeout(ACCEPT_POLL_S)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)
        self._thread.start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._connections.append(connection)
            self.accepted += 1

    @property
    def url(self) -> str:
        if self._listener is None:
            raise RuntimeError("SilentServer is not running; use it as a context manager")
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for connection in [*self._connections, self._listener]:
            if connection is not None:
                with contextlib.suppress(OSError):
                    connection.close()
        self._listener = None

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
