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
from collections.abc import Iterator

ACCEPT_POLL_S = 0.05
LISTEN_BACKLOG = 64
REQUEST_BYTES = 65536  # enough for a request line and headers


class SilentServer:
    """Accepts every connection, sends nothing back, holds it until stopped.

    ``answers``: paths (``"/v1/models"``) answered at once with 200 and that JSON body, so a
    server can look alive on one route and hang on every other, as a wedged vLLM whose API
    process still serves its model list does."""

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self._answers = answers or {}
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
            if self._answers:
                threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        """Answer a request for one of ``answers``; leave any other unanswered."""
        with contextlib.suppress(OSError):
            request = connection.recv(REQUEST_BYTES).decode("latin-1")
            parts = request.split(" ", 2)
            body = self._answers.get(parts[1]) if len(parts) > 1 else None
            if body is None:
                return
            payload = body.encode()
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            connection.close()

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


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 where nothing listens, for as long as the block runs.

    The port stays bound (without ``listen``) by this socket, so no other process of a parallel
    test run can take it: a connection to it is refused, every time. Guessing a free port and
    closing the probe would let another test's server start there in between.
    """
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]
    finally:
        holder.close()
