"""Licence-only network egress for judged q: an allow-list HTTP proxy the judge runs outside the sandbox.

An on-demand kdb+ licence (kc.lic) must reach KX's licence server whenever q starts, and q aborts with
``couldn't connect to license daemon -- exiting`` when it cannot. q honours ``http_proxy``/``HTTP_PROXY``.
So judged q keeps every isolation it has (its own network namespace included) and its environment names a
proxy that only reaches the licence hosts:

- The judge gives each slot (slot uid) a network namespace of its own, made once and kept: only a loopback
  interface, on which the judge itself listens at ``127.0.0.1:3128``. A socket stays in the namespace it was
  made in, so the judge's accept loop serves connections from inside the sandbox without any forwarder
  process there. Judged q runs in its slot's namespace (``nsenter --net``) rather than in a fresh one.
- The proxy allows ``CONNECT host:port`` (and plain ``http://`` requests) only to the allowed pairs and
  answers everything else ``403``, counting refusals. Upstream connections leave from the judge's own
  namespace, so they reach what the trainer reaches; nothing else does.
- In recording mode (``--q_licence_hosts auto``, only for the judge's own trusted ``1+1`` start-up run)
  every request is allowed and its host:port recorded; the recording becomes the allow-list.

What judged code can reach: the proxy at 127.0.0.1:3128 in its own namespace, and through it only the
allowed host:port pairs. The host's loopback services, other slots' namespaces and every other address are
out of reach (no route, nothing listening). A slot's namespace outlives each execution, but every process
of an execution dies with its PID namespace, so no socket of one execution survives into the next.

Making a network namespace needs CAP_SYS_ADMIN: licence egress works when the judge runs as root.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import re
import selectors
import socket
import struct
import threading
from urllib.parse import urlsplit, urlunsplit

from cli import UsageError

logger = logging.getLogger(__name__)

PROXY_PORT = 3128  # the same in every slot namespace: each namespace has its own, otherwise empty, loopback
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
PROXY_ENV = {name: PROXY_URL for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
# Public CA certificates (OpenSSL's default /usr/lib/ssl/certs links here), bound read-only for q when it has
# egress, in case q checks its licence server's TLS certificate.
TLS_TRUST = tuple(path for path in ("/etc/ssl/certs",) if os.path.isdir(path))
HEAD_LIMIT = 8192  # bytes of request line and headers a client may send before it is cut off
HEAD_TIMEOUT = 10.0  # seconds a client has to send its request head
CONNECT_TIMEOUT = 10.0  # seconds to reach an allowed host
SEND_TIMEOUT = 30.0  # seconds a relay waits for a side that stops reading
SLOT_CONNECTIONS = 8  # open relays at once per slot; more are closed unanswered, so a slot starves only itself
FLAG = "--q_licence_hosts"
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


class LicenceHostsError(UsageError):
    """A bad ``--q_licence_hosts`` value; the message names the flag and the fix."""


class LicenceEgressUnavailable(RuntimeError):
    """This host cannot give judged q licence-only egress; the message names the cause."""


def parse_licence_hosts(text: str) -> str | tuple[tuple[str, int], ...]:
    """``"auto"``, ``()`` for ``none``, or the allowed (host, port) pairs, hosts lower-cased."""
    value = text.strip()
    if value in ("auto", "none"):
        return "auto" if value == "auto" else ()
    pairs = []
    for item in value.split(","):
        match = _HOST_PORT.match(item.strip())
        if not match or not 1 <= int(match.group(2)) <= 65535:
            raise LicenceHostsError(
                f"{FLAG}: {item.strip()!r} is not HOST:PORT; use auto, none, or "
                f"HOST:PORT[,HOST:PORT...] with a port from 1 to 65535 (e.g. licence.kx.com:443)"
            )
        pairs.append((match.group(1).strip("[]").lower(), int(match.group(2))))
    return tuple(dict.fromkeys(pairs))


def describe_hosts(pairs) -> str:
    return ", ".join(f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in sorted(pairs))


def _slot_namespace() -> tuple[int, socket.socket]:
    """A new network namespace with loopback up and the proxy's listener in it: (namespace fd, listener).

    Done in a thread of its own: unshare(CLONE_NEWNET) moves only the calling thread, which then ends.
    """
    made: dict = {}

    def make() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(_CLONE_NEWNET) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"unshare(CLONE_NEWNET): {os.strerror(error)}")
            made["fd"] = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                flags = struct.unpack("16sh22x", fcntl.ioctl(probe, _SIOCGIFFLAGS, struct.pack("16sh22x", b"lo", 0)))[1]
                fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | _IFF_UP))
            made["listener"] = socket.create_server(("127.0.0.1", PROXY_PORT), backlog=16)
            made["listener"].setblocking(False)  # a client gone between select and accept must not block the loop
        except OSError as error:
            made["error"] = error

    thread = threading.Thread(target=make, name="licence-netns")
    thread.start()
    thread.join()
    if "error" in made:
        if "fd" in made:
            os.close(made["fd"])
        raise LicenceEgressUnavailable(
            f"cannot make a network namespace for the licence proxy ({made['error']}); licence egress needs root"
        )
    return made["fd"], made["listener"]


class LicenceProxy:
    """The allow-list proxy and the slot namespaces it listens in; ``close()`` frees both.

    ``allowed`` is the allow-list, or None to record: allow everything and remember each host:port asked for
    (only for the judge's trusted start-up run). ``netns`` maps each slot uid to its namespace fd.
    """

    def __init__(self, slots: list[int], allowed: tuple[tuple[str, int], ...] | None):
        self.allowed = allowed
        self.contacted: set[tuple[str, int]] = set()
        self.refusals = 0
        self.netns: dict[int, int] = {}
        self._listeners: list[socket.socket] = []
        self._lock = threading.Lock()
        self._open: dict[socket.socket, threading.BoundedSemaphore] = {}
        self._wake_read, self._wake_write = os.pipe()
        try:
            for uid in slots:
                fd, listener = _slot_namespace()
                self.netns[uid] = fd
                self._listeners.append(listener)
                self._open[listener] = threading.BoundedSemaphore(SLOT_CONNECTIONS)
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._accept_loop, name="licence-proxy", daemon=True)
        self._thread.start()

    def enforce(self, allowed: tuple[tuple[str, int], ...]) -> None:
        """Stop recording: from now on only ``allowed`` is reached."""
        with self._lock:
            self.allowed = tuple(allowed)

    def close(self) -> None:
        if self._wake_write >= 0:
            os.write(self._wake_write, b"x")
            if getattr(self, "_thread", None):
                self._thread.join()
            os.close(self._wake_write)
            os.close(self._wake_read)
            self._wake_write = -1
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        for fd in self.netns.values():
            os.close(fd)
        self.netns.clear()

    def _accept_loop(self) -> None:
        # selectors (epoll), not select(): a trainer process can hold fds numbered above select's 1024.
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_read, selectors.EVENT_READ)
            for listener in self._listeners:
                selector.register(listener, selectors.EVENT_READ)
            while True:
                ready = [key.fileobj for key, _ in selector.select()]
                if self._wake_read in ready:
                    return
                self._accept(ready)

    def _accept(self, listeners: list[socket.socket]) -> None:
        for listener in listeners:
            try:
                client, _ = listener.accept()
            except OSError:
                continue
            if not self._open[listener].acquire(blocking=False):
                client.close()
                continue
            threading.Thread(
                target=self._serve, args=(client, self._open[listener]), name="licence-relay", daemon=True
            ).start()

    def _serve(self, client: socket.socket, slot_open: threading.BoundedSemaphore) -> None:
        try:
            with client:
                self._handle(client)
        except OSError:
            pass
        finally:
            slot_open.release()

    def _handle(self, client: socket.socket) -> None:
        client.settimeout(HEAD_TIMEOUT)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(HEAD_LIMIT)
            if not chunk or len(head) + len(chunk) > HEAD_LIMIT:
                return
            head += chunk
        head, rest = head.split(b"\r\n\r\n", 1)
        request_line, *headers = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            client.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
            return
        method, target, version = parts
        if method == "CONNECT":
            match = _HOST_PORT.match(target)
            host, port = (match.group(1).strip("[]").lower(), int(match.group(2))) if match else ("", 0)
        else:
            url = urlsplit(target)
            try:
                host, port = (url.hostname or "", url.port or 80) if url.scheme == "http" else ("", 0)
            except ValueError:
                host, port = "", 0
        if not host or not self._permitted(host, port, f"{method} {target}"):
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n")
            return
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
            return
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                path = urlunsplit(("", "", url.path or "/", url.query, ""))
                kept = [h for h in headers if not h.lower().startswith(("proxy-", "connection:"))]
                rest = ("\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"]) + "\r\n\r\n").encode(
                    "latin-1"
                ) + rest
            if rest:
                upstream.sendall(rest)
            _relay(client, upstream)

    def _permitted(self, host: str, port: int, request: str) -> bool:
        with self._lock:
            if self.allowed is None:
                self.contacted.add((host, port))
                return True
            if (host, port) in self.allowed:
                return True
            self.refusals += 1
            first = self.refusals == 1
        if first:
            logger.warning(
                "licence proxy refused %r: only %s is allowed (%s); further refusals are counted in "
                "judge/proxy_refusals",
                request[:200],
                describe_hosts(self.allowed) or "nothing",
                FLAG,
            )
        return False


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes.

    Ending at the first close (no half-close) means a relay never outlives the judged process: when the
    sandbox is killed its socket closes, and an idle licence server cannot hold the relay open.
    """
    a.settimeout(SEND_TIMEOUT)  # reads wait in select; only a peer that stops reading can hit this
    b.settimeout(SEND_TIMEOUT)
    peer = {a: b, b: a}
    with selectors.DefaultSelector() as selector:
        for sock in peer:
            selector.register(sock, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                data = key.fileobj.recv(65536)
                if not data:
                    return
                peer[key.fileobj].sendall(data)
