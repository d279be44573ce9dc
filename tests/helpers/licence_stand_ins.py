"""STAND-INS for the licence-egress tests; neither is KX software nor speaks KX's licence protocol.

``LoopbackService`` listens on 127.0.0.1 at an ephemeral port and records every connection and the first
line it receives. As a licence-server stand-in it answers that line ``GRANTED`` (or ``DENIED`` for its first
``deny_first`` connections: a server refusing starts under load); with ``reply=None`` it answers nothing,
standing for any other service on the host's loopback that judged code must never reach.
"""

from __future__ import annotations

import socket
import threading


class LoopbackService:
    def __init__(self, reply: bytes | None = b"GRANTED\n", deny_first: int = 0):
        self.reply = reply
        self.deny_first = deny_first
        self.connections = 0
        self.first_lines: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="licence-stand-in", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                denied = self.connections <= self.deny_first
            threading.Thread(target=self._answer, args=(connection, denied), daemon=True).start()

    def _answer(self, connection: socket.socket, denied: bool) -> None:
        with connection:
            if self.reply is None:
                return
            connection.settimeout(5.0)
            try:
                line = connection.makefile("rb").readline(4096)
                with self._lock:
                    self.first_lines.append(line.decode("latin-1").rstrip("\r\n"))
                connection.sendall(b"DENIED\n" if denied else self.reply)
            except OSError:
                pass

    def close(self) -> None:
        self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._server.close()
        self._thread.join(timeout=5.0)
