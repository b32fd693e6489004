"""An HTTP/1.1 upstream on loopback that writes whatever bytes a test gives it: answers no framework sends.

    def answer(request: RawRequest) -> RawAnswer:
        return RawAnswer(b"HTTP/1.1 200 OK\\r\\nContent-Length: 5\\r\\n\\r\\nhello", close=True)

    with RawHttpServer(answer) as server:       # http://127.0.0.1:<free port>
        ...
        server.requests                         # what reached it, in order, with the connection it came on

Each connection has a thread of its own that reads requests one after another (keep-alive) and writes
each answer exactly as given; ``close`` ends the connection after it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

__all__ = ["RawAnswer", "RawHttpServer", "RawRequest"]


@dataclass(frozen=True)
class RawRequest:
    method: str
    target: str
    connection: int
    """Which connection it came on (1 for the first accepted)."""


@dataclass(frozen=True)
class RawAnswer:
    data: bytes
    close: bool = False


class RawHttpServer:
    def __init__(self, answer: Callable[[RawRequest], RawAnswer]) -> None:
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._connections = 0
        self.requests: list[RawRequest] = []
        self.base_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> Self:
        self._spawn(self._accept)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(timeout=5)
        self._listener.close()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._connections += 1
            self._spawn(self._serve, connection, self._connections)

    def _serve(self, connection: socket.socket, number: int) -> None:
        connection.settimeout(0.2)
        buffer = b""
        with connection:
            while not self._stop.is_set():
                head, found, rest = buffer.partition(b"\r\n\r\n")
                if not found:
                    try:
                        received = connection.recv(65536)
                    except TimeoutError:
                        continue
                    except OSError:
                        return
                    if not received:
                        return
                    buffer += received
                    continue
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                length = next(
                    (int(v) for k, _, v in (x.partition(":") for x in lines[1:]) if k.lower() == "content-length"), 0
                )
                while len(rest) < length:
                    rest += connection.recv(65536)
                buffer = rest[length:]
                request = RawRequest(method, target, number)
                self.requests.append(request)
                answer = self._answer(request)
                connection.sendall(answer.data)
                if answer.close:
                    return
