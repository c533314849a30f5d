"""The input socket: one JSON object per line each way, several clients at once.

``journal supervise`` runs this in a process of its own (``journal input serve``), so
a prompt costs no Python start-up and the supervisor stays one thread (its quiet-
snapshot check forks only while it runs one thread: design §10, §20). Requests::

    {"op":"append","harness":"codex","session":"S","pane":"p1","client_id":"c1","text":"..."}
        -> {"ok":true,"id":"...","seq":7,"duplicate":false}    once the input is durable
    {"op":"delivered","id":"..."}      -> {"ok":true,"id":"...","seq":7,"already":false}
    {"op":"list","undelivered":true}   -> {"ok":true,"inputs":[...]}   (harness, session optional)
    {"op":"show","id":"..."}           -> {"ok":true,"input":{...},"text":"..."}
    anything that fails                -> {"ok":false,"error":"...","kind":"..."}

``text_base64`` may replace ``text`` both ways, for bytes that are not UTF-8. Each
connection is served by a thread, its requests answered in order; the main thread
accepts. SIGTERM or SIGINT stops accepting, removes the socket, lets every request in
flight finish and answer, then closes the connections.
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
from collections.abc import Callable

import msgspec

from ..errors import ConfigError, JournalError, describe_os_error
from ..report import Reporter
from .log import InputLog

#: The longest request line: a text at the largest limit, every byte escaped (``\\u00XX``).
MAX_LINE_FACTOR = 6
LINE_SLACK = 64 << 10
#: Connections served at once; one more is told so and closed.
MAX_CLIENTS = 64
#: Seconds the requests in flight get to finish when the server stops.
DRAIN_SECONDS = 10.0
#: The longest path a Unix socket address holds (``sun_path``, less its NUL).
SUN_PATH_MAX = 107
_PR_SET_PDEATHSIG = 1


class InputServer:
    """Serve ``log`` on the Unix socket at ``path`` until ``stop`` (or a stop signal)."""

    def __init__(self, log: InputLog, path: str, reporter: Reporter):
        self.log = log
        self.path = path
        self.reporter = reporter
        self.max_line = log.limit * MAX_LINE_FACTOR + LINE_SLACK
        self._clients: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()
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

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        with self._lock:
            if len(self._clients) >= MAX_CLIENTS:
                with contextlib.suppress(OSError):
                    conn.sendall(_reply({"ok": False, "error": f"serve inputs: {MAX_CLIENTS} clients are connected "
                                         "already; close one and connect again", "kind": "Busy"}))
                conn.close()
                return
            thread = threading.Thread(target=self._client, args=(conn,), name="input-client", daemon=True)
            self._clients[conn] = thread
        thread.start()

    def _close(self) -> None:
        """Remove the socket, then let each connection finish the request it is serving
        and see the end of its input."""
        with contextlib.suppress(OSError):
            if os.path.samestat(os.lstat(self.path), self._bound):  # never another server's socket
                os.unlink(self.path)
        self._listener.close()
        with self._lock:
            clients = list(self._clients.items())
        for conn, _ in clients:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)
        for _, thread in clients:
            thread.join(DRAIN_SECONDS)
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ------------------------------------------------------------------ one client

    def _client(self, conn: socket.socket) -> None:
        try:
            with conn, conn.makefile("rb") as reader:
                while True:
                    line = reader.readline(self.max_line + 1)
                    if not line:
                        return
                    if len(line) > self.max_line and not line.endswith(b"\n"):
                        _skip_line(reader, self.max_line)
                        answer = {"ok": False, "kind": "UsageError",
                                  "error": f"serve inputs: a request line is longer than {self.max_line:,} bytes "
                                           f"(the input limit is {self.log.limit:,} bytes of text)"}
                    elif not line.strip():
                        continue
                    else:
                        answer = self.answer(line)
                    conn.sendall(_reply(answer))
        except OSError:
            pass  # the client went away; nothing it asked for is undone
        finally:
            with self._lock:
                self._clients.pop(conn, None)

    def answer(self, line: bytes) -> dict:
        """The reply to one request line."""
        try:
            request = msgspec.json.decode(line)
            if not isinstance(request, dict):
                raise ConfigError("serve inputs: a request is a JSON object with an \"op\"")
            op = request.get("op")
            handler = _OPS.get(op) if isinstance(op, str) else None
            if handler is None:
                raise ConfigError(f"serve inputs: unknown op {op!r}; ops are {', '.join(sorted(_OPS))}")
            return {"ok": True, **handler(self.log, request)}
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


def _append(log: InputLog, request: dict) -> dict:
    done = log.append(_field(request, "harness"), _field(request, "session"), _text(request),
                      pane=_field(request, "pane", False), client_id=_field(request, "client_id", False))
    return {"id": done.id, "seq": done.seq, "duplicate": done.duplicate}


def _delivered(log: InputLog, request: dict) -> dict:
    done = log.mark_delivered(_field(request, "id"))
    return {"id": done.id, "seq": done.seq, "already": done.already, "delivered_at": done.delivered_at}


def _list(log: InputLog, request: dict) -> dict:
    found = log.list(harness=_field(request, "harness", False), session=_field(request, "session", False),
                     undelivered=bool(request.get("undelivered")))
    return {"inputs": [msgspec.to_builtins(info) for info in found]}


def _show(log: InputLog, request: dict) -> dict:
    info, text = log.show(_field(request, "id"))
    return {"input": msgspec.to_builtins(info), **text_fields(text)}


def text_fields(text: bytes) -> dict:
    """``{"text": ...}`` for UTF-8, else ``{"text_base64": ...}``."""
    try:
        return {"text": text.decode()}
    except UnicodeDecodeError:
        return {"text_base64": base64.b64encode(text).decode()}


_OPS = {"append": _append, "delivered": _delivered, "list": _list, "show": _show}


def _reply(answer: dict) -> bytes:
    return msgspec.json.encode(answer) + b"\n"


def _skip_line(reader, chunk: int) -> None:
    """Read past the rest of an overlong line."""
    while True:
        piece = reader.readline(chunk)
        if not piece or piece.endswith(b"\n"):
            return


def run_server(make_log: Callable[[], InputLog], path: str, reporter: Reporter, *, ready_fd: int | None = None,
               parent_pid: int | None = None) -> None:
    """Serve until SIGTERM or SIGINT (or, with ``parent_pid``, until that process dies:
    ``journal supervise`` killed with SIGKILL leaves no server behind). ``ready_fd``
    gets one line, ``ready`` once the socket listens or ``error: <why>`` when it cannot
    (the store cannot be opened, the path is taken), and is closed."""
    if parent_pid is not None:
        _die_with_parent(parent_pid)
    try:
        server = InputServer(make_log(), path, reporter)
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
