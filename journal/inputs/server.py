"""The input socket: one JSON object per line each way, several clients at once.

``journal supervise`` runs this in a process of its own (``journal input serve``), so
a prompt costs no Python start-up and the supervisor stays one thread (its quiet-
snapshot check forks only while it runs one thread: design §10, §20). Requests::

    {"op":"append","harness":"codex","session":"S","pane":"p1","client_id":"c1","text":"..."}
        -> {"ok":true,"id":"...","seq":7,"duplicate":false}    once the input is durable
    {"op":"delivered","id":"..."}      -> {"ok":true,"id":"...","seq":7,"already":false}
    {"op":"list","undelivered":true}   -> {"ok":true,"inputs":[...]}   (harness, session optional)
    {"op":"show","id":"..."}           -> {"ok":true,"input":{...},"text":"..."}
    {"op":"stats"}                     -> {"ok":true,"connections":3,"buffered":0,...}   (``SocketStats``)
    anything that fails                -> {"ok":false,"error":"...","kind":"..."}

``text_base64`` may replace ``text`` both ways, for bytes that are not UTF-8. Each
connection is served by a thread, its requests answered in order; the main thread
accepts. SIGTERM or SIGINT stops accepting, removes the socket, lets every request in
flight finish and answer, then closes the connections.

**Limits** (design §20), so that no client, stalled or hostile, keeps others out:

* a request line must arrive in full within ``read_timeout`` seconds of its first
  byte (and an answer be taken within as long); else the connection is told so and
  closed, and its slot is free;
* a connection reads ``CHUNK`` bytes at a time and holds that much of a line on its
  own; every byte beyond comes from a budget all connections share (``BUDGET_LINES``
  longest lines), and a connection waits for it, within its deadline. So the request
  bytes held never exceed ``MAX_CLIENTS * CHUNK`` plus the budget, however many
  clients send half a line;
* at most ``MAX_CLIENTS`` connections; one more takes the slot of the connection idle
  longest (nothing sent since its last answer), when that one has been idle for
  ``read_timeout``, which is closed; else it is told the server is busy.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ctypes
import errno
import os
import selectors
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable

import msgspec

from ..errors import ConfigError, JournalError
from ..os_errors import describe_os_error
from ..report import Reporter
from .log import InputLog

#: The longest request line: a text at the largest limit, every byte escaped (``\\u00XX``).
MAX_LINE_FACTOR = 6
LINE_SLACK = 64 << 10
#: Connections served at once; one more takes an idle one's slot, or is told so and closed.
MAX_CLIENTS = 64
#: Seconds a request line may take to arrive in full, from its first byte (``--read-timeout``).
READ_TIMEOUT = 30.0
#: Bytes a connection reads at a time, and holds of a request line without the shared budget.
CHUNK = 64 << 10
#: The shared budget of request bytes beyond each connection's ``CHUNK``, in longest lines.
BUDGET_LINES = 2
#: Seconds the requests in flight get to finish when the server stops.
DRAIN_SECONDS = 10.0
#: The longest path a Unix socket address holds (``sun_path``, less its NUL).
SUN_PATH_MAX = 107
_PR_SET_PDEATHSIG = 1


class SocketStats(msgspec.Struct, kw_only=True):
    """What the socket serves and holds now, and what it closed or refused since it
    started (``{"op":"stats"}``)."""

    connections: int        # served now
    max_connections: int
    read_timeout: float
    buffered: int           # bytes of request lines held now, all connections together
    peak_buffered: int      # the most held at once
    buffer_bound: int       # what ``buffered`` never exceeds: max_connections * CHUNK + the shared budget
    timed_out: int          # connections closed: a line (or an answer) not through within read_timeout
    evicted: int            # idle connections closed to make room for a new one
    refused: int            # connections told the server is busy


class _Connection:
    """One client's connection, as the server's lock guards it."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.thread: threading.Thread | None = None
        self.held = 0          # bytes of request line it holds
        self.charged = 0       # bytes it drew from the shared budget
        self.idle_since: float | None = time.monotonic()   # None while a line arrives or is answered
        self.evicted = False


class _Stalled(Exception):
    """A connection's line (or answer) did not get through within the read timeout."""


class InputServer:
    """Serve ``log`` on the Unix socket at ``path`` until ``stop`` (or a stop signal)."""

    def __init__(self, log: InputLog, path: str, reporter: Reporter, *, read_timeout: float = READ_TIMEOUT):
        self.log = log
        self.path = path
        self.reporter = reporter
        self.read_timeout = read_timeout
        self.max_line = log.limit * MAX_LINE_FACTOR + LINE_SLACK
        self.budget = BUDGET_LINES * self.max_line
        self._clients: dict[socket.socket, _Connection] = {}
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)   # notified when budget is given back
        self._charged = self._held = self._peak = 0
        self._timed_out = self._evicted = self._refused = 0
        self._stopping = False
        self._listener = self._bind()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def _bind(self) -> socket.socket:
        """Listen at ``path``: a socket left by a server that died is replaced; anything
        else there, or a server still answering, is refused."""
        if len(os.fsencode(self.path)) > SUN_PATH_MAX:
            raise ConfigError(f"serve inputs: the socket path {self.path} is {len(os.fsencode(self.path))} bytes, "
                              f"over the {SUN_PATH_MAX} a Unix socket path may hold; set JOURNAL_INPUT_SOCKET "
                              "(or input_socket in the config) to a shorter path")
        self._clear_stale()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            os.chmod(self.path, 0o600)
            listener.listen(MAX_CLIENTS)
            self._bound = os.lstat(self.path)
        except OSError as err:
            listener.close()
            raise ConfigError(f"serve inputs: cannot listen on {describe_os_error(err, self.path)}") from None
        return listener

    def _clear_stale(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        except OSError as err:
            raise ConfigError(f"serve inputs: {describe_os_error(err, self.path)}") from None
        if not stat.S_ISSOCK(st.st_mode):
            raise ConfigError(f"serve inputs: {self.path} exists and is not a socket; move it aside, or set "
                              "JOURNAL_INPUT_SOCKET to another path")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(self.path)
        except OSError as err:
            if err.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise ConfigError(f"serve inputs: {describe_os_error(err, self.path)}") from None
            os.unlink(self.path)  # a server that died left it
            return
        finally:
            probe.close()
        raise ConfigError(f"serve inputs: another server answers on {self.path}; stop it, or set "
                          "JOURNAL_INPUT_SOCKET to another path")

    # ------------------------------------------------------------------ the accept loop

    def serve(self, ready: Callable[[], None] = lambda: None) -> None:
        """Accept until ``stop``; then drain (see the module docstring)."""
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        ready()
        try:
            while not self._stopping:
                for key, _ in sel.select():
                    if key.fileobj is self._listener and not self._stopping:
                        self._accept()
        finally:
            sel.close()
            self._close()

    def stop(self) -> None:
        """Stop accepting (safe from a signal handler or another thread)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def stats(self) -> SocketStats:
        with self._lock:
            return SocketStats(connections=len(self._clients), max_connections=MAX_CLIENTS,
                               read_timeout=self.read_timeout, buffered=self._held, peak_buffered=self._peak,
                               buffer_bound=MAX_CLIENTS * CHUNK + self.budget, timed_out=self._timed_out,
                               evicted=self._evicted, refused=self._refused)

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except OSError:
            return
        with self._lock:
            if len(self._clients) >= MAX_CLIENTS and not self._evict_idlest():
                self._refused += 1
                sock.settimeout(0)   # a word if it fits the socket's buffer; never a wait
                with contextlib.suppress(OSError):
                    sock.sendall(_reply({"ok": False, "error": f"serve inputs: {MAX_CLIENTS} clients are connected "
                                         "already; close one and connect again", "kind": "Busy"}))
                sock.close()
                return
            conn = self._clients[sock] = _Connection(sock)
            conn.thread = threading.Thread(target=self._client, args=(conn,), name="input-client", daemon=True)
        conn.thread.start()

    def _evict_idlest(self) -> bool:
        """Close the connection idle longest, if idle for ``read_timeout`` (the lock held)."""
        now = time.monotonic()
        idle = [c for c in self._clients.values()
                if c.idle_since is not None and now - c.idle_since >= self.read_timeout]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c.idle_since)
        victim.evicted = True
        del self._clients[victim.sock]
        self._evicted += 1
        with contextlib.suppress(OSError):
            victim.sock.shutdown(socket.SHUT_RDWR)   # its thread sees the end and leaves
        return True

    def _close(self) -> None:
        """Remove the socket, then let each connection finish the request it is serving
        and see the end of its input."""
        with contextlib.suppress(OSError):
            if os.path.samestat(os.lstat(self.path), self._bound):  # never another server's socket
                os.unlink(self.path)
        self._listener.close()
        with self._lock:
            clients = list(self._clients.values())
            self._room.notify_all()   # a connection waiting for budget gives up
        for conn in clients:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RD)
        for conn in clients:
            conn.thread.join(DRAIN_SECONDS)
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ------------------------------------------------------------------ one client

    def _client(self, conn: _Connection) -> None:
        try:
            self._serve_lines(conn)
        except _Stalled:
            with self._lock:
                self._timed_out += 1
            conn.sock.settimeout(0)   # a word if it fits the socket's buffer; never a wait
            with contextlib.suppress(OSError):
                conn.sock.sendall(_reply({"ok": False, "kind": "Timeout", "error": (
                    f"serve inputs: a request line did not arrive in full within {self.read_timeout:g}s; the "
                    "connection is closed, connect again")}))
        except OSError:
            pass  # the client went away; nothing it asked for is undone
        finally:
            conn.sock.close()
            with self._lock:
                if self._clients.get(conn.sock) is conn:
                    del self._clients[conn.sock]
                self._hold(conn, 0)
                self._charge(conn, 0)

    def _serve_lines(self, conn: _Connection) -> None:
        """Answer each request line of ``conn`` in order, until it ends. A line longer than
        ``max_line`` is read past (never held) and answered with an error."""
        buf, scanned, started, overlong = bytearray(), 0, None, False
        while True:
            end = buf.find(b"\n", scanned)
            if end < 0:
                overlong = overlong or len(buf) > self.max_line
                if overlong:
                    buf = bytearray()
                scanned = len(buf)
                piece = self._receive(conn, len(buf), started)
                if not piece:
                    return
                started = started or time.monotonic()
                buf += piece
                self._note(conn, len(buf))
                continue
            line, buf, scanned = buf[:end + 1], buf[end + 1:], 0
            if overlong or end > self.max_line:
                answer = {"ok": False, "kind": "UsageError",
                          "error": f"serve inputs: a request line is longer than {self.max_line:,} bytes "
                                   f"(the input limit is {self.log.limit:,} bytes of text)"}
            else:
                answer = None if line.isspace() else self.answer(line)
            del line
            started, overlong = (time.monotonic() if buf else None), False
            self._note(conn, len(buf))   # idle from the answer on, when nothing more came
            if answer is not None:
                conn.sock.settimeout(self.read_timeout)
                self._send(conn, _reply(answer))

    def _receive(self, conn: _Connection, holding: int, started: float | None) -> bytes:
        """Up to ``CHUNK`` more bytes of ``conn`` (b"" at its end), while it holds
        ``holding``: the budget for them is drawn first. Without a line begun it waits as
        long as it takes; with one, until ``read_timeout`` after its first byte
        (``_Stalled``)."""
        deadline = None if started is None else started + self.read_timeout
        with self._lock:
            if not self._charge(conn, holding, deadline):
                if self._stopping:
                    return b""
                raise _Stalled
        if deadline is None:
            conn.sock.settimeout(None)
        else:
            conn.sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            piece = conn.sock.recv(CHUNK)
        except TimeoutError:
            raise _Stalled from None
        with self._lock:
            if conn.evicted:
                return b""
            conn.idle_since = None
        return piece

    def _send(self, conn: _Connection, data: bytes) -> None:
        try:
            conn.sock.sendall(data)
        except TimeoutError:
            raise _Stalled from None

    def _note(self, conn: _Connection, held: int) -> None:
        """``conn`` holds ``held`` bytes of request lines (0: it is idle again)."""
        with self._lock:
            self._hold(conn, held)
            if held == 0 and conn.idle_since is None:
                conn.idle_since = time.monotonic()

    def _hold(self, conn: _Connection, held: int) -> None:
        """Count what ``conn`` holds (the lock held)."""
        self._held += held - conn.held
        conn.held = held
        self._peak = max(self._peak, self._held)

    def _charge(self, conn: _Connection, need: int, deadline: float | None = None) -> bool:
        """Make ``conn``'s draw on the shared budget ``need`` bytes (the lock held):
        giving back at once, taking only when there is room, waiting for it until
        ``deadline``. False when that passed, or the server stops, first."""
        while need > conn.charged and self._charged - conn.charged + need > self.budget:
            left = None if deadline is None else deadline - time.monotonic()
            if self._stopping or (left is not None and left <= 0):
                return False
            self._room.wait(left)
        if need < conn.charged:
            self._room.notify_all()
        self._charged += need - conn.charged
        conn.charged = need
        return True

    def answer(self, line: bytes | bytearray) -> dict:
        """The reply to one request line."""
        try:
            request = msgspec.json.decode(line)
            if not isinstance(request, dict):
                raise ConfigError("serve inputs: a request is a JSON object with an \"op\"")
            op = request.get("op")
            handler = _OPS.get(op) if isinstance(op, str) else None
            if handler is None:
                raise ConfigError(f"serve inputs: unknown op {op!r}; ops are {', '.join(sorted(_OPS))}")
            return {"ok": True, **handler(self, request)}
        except (msgspec.DecodeError, RecursionError) as err:   # RecursionError: nested past the decoder's depth
            return {"ok": False, "error": f"serve inputs: a request line is not JSON: {err}", "kind": "UsageError"}
        except JournalError as err:
            return {"ok": False, "error": str(err), "kind": type(err).__name__}
        except OSError as err:
            return {"ok": False, "error": describe_os_error(err), "kind": "OSError"}
        except Exception as err:  # noqa: BLE001 - one request's failure never takes the server down
            self.reporter.warn(f"serve inputs: a request failed: {type(err).__name__}: {err}")
            return {"ok": False, "error": f"serve inputs: {type(err).__name__}: {err}", "kind": "InternalError"}


def _field(request: dict, name: str, required: bool = True):
    value = request.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"serve inputs: {request.get('op')}: {name!r} must be a string")
    return value


def _text(request: dict) -> bytes:
    if "text_base64" in request:
        try:
            return base64.b64decode(_field(request, "text_base64"), validate=True)
        except binascii.Error as err:
            raise ConfigError(f"serve inputs: append: text_base64 is not base64: {err}") from None
    text = _field(request, "text")
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise ConfigError("serve inputs: append: text holds a lone surrogate; send the bytes as text_base64") from None


def _append(server: InputServer, request: dict) -> dict:
    done = server.log.append(_field(request, "harness"), _field(request, "session"), _text(request),
                      pane=_field(request, "pane", False), client_id=_field(request, "client_id", False))
    return {"id": done.id, "seq": done.seq, "duplicate": done.duplicate}


def _delivered(server: InputServer, request: dict) -> dict:
    done = server.log.mark_delivered(_field(request, "id"))
    return {"id": done.id, "seq": done.seq, "already": done.already, "delivered_at": done.delivered_at}


def _list(server: InputServer, request: dict) -> dict:
    found = server.log.list(harness=_field(request, "harness", False), session=_field(request, "session", False),
                     undelivered=bool(request.get("undelivered")))
    return {"inputs": [msgspec.to_builtins(info) for info in found]}


def _show(server: InputServer, request: dict) -> dict:
    info, text = server.log.show(_field(request, "id"))
    return {"input": msgspec.to_builtins(info), **text_fields(text)}


def text_fields(text: bytes) -> dict:
    """``{"text": ...}`` for UTF-8, else ``{"text_base64": ...}``."""
    try:
        return {"text": text.decode()}
    except UnicodeDecodeError:
        return {"text_base64": base64.b64encode(text).decode()}


def _stats(server: InputServer, request: dict) -> dict:
    return msgspec.to_builtins(server.stats())


_OPS = {"append": _append, "delivered": _delivered, "list": _list, "show": _show, "stats": _stats}


def _reply(answer: dict) -> bytes:
    return msgspec.json.encode(answer) + b"\n"


def run_server(make_log: Callable[[], InputLog], path: str, reporter: Reporter, *, ready_fd: int | None = None,
               parent_pid: int | None = None, read_timeout: float = READ_TIMEOUT) -> None:
    """Serve until SIGTERM or SIGINT (or, with ``parent_pid``, until that process dies:
    ``journal supervise`` killed with SIGKILL leaves no server behind). ``ready_fd``
    gets one line, ``ready`` once the socket listens or ``error: <why>`` when it cannot
    (the store cannot be opened, the path is taken), and is closed."""
    if parent_pid is not None:
        _die_with_parent(parent_pid)
    try:
        server = InputServer(make_log(), path, reporter, read_timeout=read_timeout)
    except (JournalError, OSError) as err:
        _tell(ready_fd, f"error: {describe_os_error(err) if not isinstance(err, JournalError) else err}")
        raise
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: server.stop())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def ready() -> None:
        if ready_fd is None:   # else the supervisor that reads it says what it needs to
            reporter.note(f"serving inputs on {path}")
        _tell(ready_fd, "ready")

    server.serve(ready)


def _tell(fd: int | None, line: str) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, line.replace("\n", " ").encode() + b"\n")
    with contextlib.suppress(OSError):
        os.close(fd)


def _die_with_parent(parent_pid: int) -> None:
    """Ask for SIGTERM when the parent dies (``PR_SET_PDEATHSIG``); stop now if it is gone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:
        raise SystemExit(0)
