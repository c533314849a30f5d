"""The input socket (``journal/inputs/server.py``) and the server a supervisor runs for CMD
(``journal/supervise/inputs.py``; design §20): the line-JSON protocol, several clients at
once, checkpoints running meanwhile, and the server's life beside CMD's."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from journal.inputs.log import InputLog
from journal.repository.repository import Repository
from journal.store import open_store

from conftest import clean_env, container_env, wait_for
from s3server import S3_ENV
from supervisebox import (JOURNAL, alive, boxes, children_of, cmd_children, finish, is_input_server, manifest_seqs,
                          proc_stat)

#: CMD for the supervise tests: it does what ``CMD_MODE`` says and leaves its results in RUNDIR.
CMD = r'''
import json, os, signal, socket, sys, threading, time
mode, run = sys.argv[1], sys.argv[2]
path = os.environ.get("JOURNAL_INPUT_SOCKET")

def ask(sock, reader, request):
    sock.sendall(json.dumps(request).encode() + b"\n")
    return json.loads(reader.readline())

def connect():
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    return sock, sock.makefile("rb")

open(os.path.join(run, "env"), "w").write(json.dumps({"socket": path}))
if mode == "clients":        # 10 clients at once while the transcript grows and checkpoints run
    transcript = sys.argv[3]
    # with a store: the transcript keeps growing until it holds two manifests (a tick
    # committed while CMD ran, however slow this machine is just now), for 60 s at most
    manifests = os.path.join(sys.argv[5], "manifests") if len(sys.argv) > 5 else None

    def committed():
        try:
            return sum(n.isdigit() for n in os.listdir(manifests)) >= 2
        except OSError:
            return False

    os.makedirs(os.path.dirname(transcript), exist_ok=True)
    answers, done = [], threading.Event()

    def client(n):
        sock, reader = connect()
        for i in range(int(sys.argv[4])):
            session = "shared" if i % 2 else f"own-{n}"
            answers.append(ask(sock, reader, {"op": "append", "harness": "codex", "session": session,
                                              "client_id": f"{n}-{i}", "text": f"client {n} prompt {i}"}))
        sock.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    with open(transcript, "ab") as fh:
        line = 0
        deadline = time.monotonic() + 60
        while any(t.is_alive() for t in threads) or (
                manifests is not None and not committed() and time.monotonic() < deadline):
            fh.write(json.dumps({"line": line, "pad": "x" * 200}).encode() + b"\n")
            fh.flush()
            line += 1
            time.sleep(0.002)
    open(os.path.join(run, "answers"), "w").write(json.dumps(answers))
elif mode == "last-words":   # a prompt sent after the stop signal is still stored
    def last(*_):
        sock, reader = connect()
        open(os.path.join(run, "last"), "w").write(json.dumps(ask(sock, reader, {
            "op": "append", "harness": "codex", "session": "S", "text": "sent while stopping"})))
        sys.exit(0)
    signal.signal(signal.SIGTERM, last)
    open(os.path.join(run, "ready"), "w").close()
    while True:
        time.sleep(0.05)
else:                        # wait to be stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    open(os.path.join(run, "ready"), "w").close()
    while True:
        time.sleep(0.05)
'''


@pytest.fixture
def box(tmp_path):
    yield from boxes(tmp_path, "")


@pytest.fixture
def short_dir():
    """A directory with a short path, for sockets (a Unix socket path holds 107 bytes)."""
    path = tempfile.mkdtemp(prefix="jis-")
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


def cmd(b, mode: str, *args: str) -> list[str]:
    script = b.root / "cmd.py"
    script.write_text(CMD)
    return [sys.executable, str(script), mode, str(b.run_dir), *args]


def started(box, mode: str, *opts: str, socket_path: str | None = None, **kwargs):
    """A box whose supervise runs CMD in ``mode``, once CMD is running: ``(box, supervise)``."""
    b = box()
    b.codex.mkdir()
    if socket_path is not None:
        b.env["JOURNAL_INPUT_SOCKET"] = socket_path
    sup = b.supervise(cmd(b, mode), *opts, **kwargs)
    wait_for(lambda: (b.run_dir / "ready").exists() or sup.poll() is not None, 60, "CMD to start")
    return b, sup


def log_of(store: Path) -> InputLog:
    return InputLog(Repository.open(open_store(str(store))))


def server_pid(sup_pid: int) -> int | None:
    found = [p for p, _, _ in children_of(sup_pid) if is_input_server(p)]
    return found[0] if found else None


class Client:
    """One connection to the socket: ``ask(request)`` sends a line and reads the answer."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.reader = self.sock.makefile("rb")

    def send(self, raw: bytes) -> dict:
        self.sock.sendall(raw)
        return json.loads(self.reader.readline())

    def ask(self, request: dict) -> dict:
        return self.send(json.dumps(request).encode() + b"\n")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


@pytest.fixture
def serve(tmp_path, short_dir):
    """``journal input serve`` on a local store (limit 100 bytes) as a real process."""
    store = tmp_path / "store"
    path = str(short_dir / "input.sock")
    env = clean_env(container_env(tmp_path / "local", store, tmp_path, JOURNAL_INPUT_LIMIT="100"))
    proc = subprocess.Popen(JOURNAL + ["input", "serve", "--socket", path], env=env, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr.readline().startswith(f"serving inputs on {path}")
    yield path, proc, store
    if proc.poll() is None:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- the protocol


def test_the_socket_answers_every_request_of_a_connection_in_order(serve):
    path, proc, store = serve
    c = Client(path)
    first = c.ask({"op": "append", "harness": "codex", "session": "S", "pane": "p1", "client_id": "c1",
                   "text": "héllo"})
    assert first == {"ok": True, "id": first["id"], "seq": 1, "duplicate": False}
    assert c.ask({"op": "append", "harness": "codex", "session": "S", "client_id": "c1", "text": "héllo"}) == \
        {**first, "duplicate": True}
    reused = c.ask({"op": "append", "harness": "codex", "session": "S", "client_id": "c1", "text": "another"})
    assert (reused["ok"], reused["kind"]) == (False, "ClientIdReused") and first["id"] in reused["error"]
    binary = bytes([0, 255, 10, 13])
    second = c.ask({"op": "append", "harness": "codex", "session": "S", "text_base64": base64.b64encode(binary)
                    .decode()})
    assert second["seq"] == 2
    shown = c.ask({"op": "show", "id": second["id"]})
    assert base64.b64decode(shown["text_base64"]) == binary and shown["input"]["seq"] == 2
    assert c.ask({"op": "show", "id": first["id"]})["text"] == "héllo"
    delivered = c.ask({"op": "delivered", "id": first["id"]})
    assert delivered["ok"] and delivered["already"] is False
    assert c.ask({"op": "delivered", "id": first["id"]})["already"] is True
    assert [i["seq"] for i in c.ask({"op": "list", "undelivered": True})["inputs"]] == [2]

    bad = [c.send(b"not json\n"), c.ask({"op": "zap"}), c.ask({"op": "append", "harness": "codex", "text": "x"}),
           c.ask({"op": "append", "harness": "codex", "session": "S", "text": "x" * 101}),
           c.ask({"op": "delivered", "id": "../../x"}), c.send(b"[1, 2]\n"),
           c.send(b"[" * 30000 + b"]" * 30000 + b"\n")]   # nested past the decoder's depth
    assert [b["ok"] for b in bad] == [False] * 7
    assert "not JSON" in bad[6]["error"]
    assert "not JSON" in bad[0]["error"] and "unknown op 'zap'" in bad[1]["error"]
    assert "'session' must be a string" in bad[2]["error"]
    assert bad[3]["kind"] == "InputTooLarge" and "nothing was stored" in bad[3]["error"]
    overlong = c.send(b'{"op":"append","text":"' + b"y" * (100 * 6 + (64 << 10)) + b'"}\n')
    assert overlong["ok"] is False and "longer than" in overlong["error"]
    assert c.ask({"op": "append", "harness": "codex", "session": "S", "text": "still served"})["seq"] == 3
    assert [i.seq for i in log_of(store).list()] == [1, 2, 3], "no failed request stored anything"
    c.close()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not os.path.exists(path), "the server removes its socket"


def test_several_clients_at_once_get_unique_gapless_sequences_and_their_own_answers(serve):
    path, _proc, store = serve
    answers: dict[int, list[dict]] = {}

    def client(n: int) -> None:
        c = Client(path)
        answers[n] = [c.ask({"op": "append", "harness": "codex", "session": "shared" if i % 2 else f"own-{n}",
                             "client_id": f"{n}-{i}", "text": f"{n}:{i}"}) for i in range(20)]
        answers[n].append(c.ask({"op": "append", "harness": "codex", "session": "shared", "client_id": f"{n}-1",
                                 "text": f"{n}:1"}))   # a retry sends the same text
        c.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(answers) == list(range(10)) and all(a["ok"] for got in answers.values() for a in got)
    for got in answers.values():
        assert got[-1] == {**got[1], "duplicate": True}, "a retry answers with the first"
    log = log_of(store)
    listed = list(log.list())
    assert len(listed) == 200
    assert [i.seq for i in listed if i.session == "shared"] == list(range(1, 101))
    for info in listed:
        n, i = info.client_id.split("-")
        assert log.show(info.id)[1] == f"{n}:{i}".encode()


# ---------------------------------------------------------------- stalled and idle clients

#: The read timeout the tests give the server: short, so that a stalled client's slot comes free soon.
SHORT_TIMEOUT = "0.5"


def started_server(tmp_path: Path, path: str, **env: str) -> subprocess.Popen:
    """``journal input serve`` at the default input limit (1 MiB), listening on ``path``."""
    env = clean_env(container_env(tmp_path / "local", tmp_path / "store", tmp_path, **env))
    proc = subprocess.Popen(JOURNAL + ["input", "serve", "--socket", path], env=env, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr.readline().startswith(f"serving inputs on {path}")
    return proc


@pytest.fixture
def serve_short(tmp_path, short_dir):
    """A server whose read timeout is 0.5 s, set as supervise passes it on: in the environment."""
    path = str(short_dir / "input.sock")
    proc = started_server(tmp_path, path, JOURNAL_INPUT_READ_TIMEOUT="0.5")
    yield path
    proc.kill()
    proc.wait()


def connected(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    return sock


def answered(path: str, request: dict) -> dict | None:
    """One request on a new connection: its answer, or None when the server is busy."""
    try:
        c = Client(path)
    except OSError:
        return None
    try:
        answer = c.ask(request)
    except (OSError, ValueError):   # told busy and closed before the request went out
        return None
    finally:
        c.close()
    return None if answer.get("kind") == "Busy" else answer


def end_of(sock: socket.socket) -> bytes:
    """Everything the server sends ``sock`` until it closes it."""
    sock.settimeout(60)
    got = b""
    with contextlib.suppress(ConnectionResetError):
        while piece := sock.recv(65536):
            got += piece
    return got


HALF_A_LINE = b'{"op":"append","harness":"codex","session":"S","text":"' + b"x" * (3 << 20)   # never ends


def test_clients_that_stall_half_way_through_a_line_lose_their_slots_to_a_real_append(serve_short):
    path = serve_short
    stalled = [connected(path) for _ in range(64)]
    try:
        for sock in stalled:
            sock.sendall(HALF_A_LINE[:1000])
        stored = wait_for(lambda: answered(path, {"op": "append", "harness": "codex", "session": "S",
                                                  "text": "a real prompt"}), 60, "a real append to get through")
        assert stored["ok"] and stored["seq"] == 1
        replies = [end_of(sock) for sock in stalled]
    finally:
        for sock in stalled:
            sock.close()

    assert all(r == b"" or json.loads(r)["kind"] == "Timeout" for r in replies), "each told why, or just closed"
    stats = wait_for(lambda: (got := answered(path, {"op": "stats"})) and got["connections"] == 1 and got, 60,
                     "the stalled connections to be gone")
    assert stats["timed_out"] + stats["evicted"] == 64, "a slot freed for each stalled client"
    assert stats["peak_buffered"] <= stats["buffer_bound"]


def test_the_request_bytes_a_server_holds_stay_within_a_bound_that_does_not_grow_with_its_slots(tmp_path,
                                                                                                 short_dir):
    """63 clients each send 3 MiB of a line that never ends (189 MiB in all), and block:
    the server holds 64 KiB of each, then only what a budget shared by all allows."""
    path = str(short_dir / "input.sock")
    proc = started_server(tmp_path, path)   # the default read timeout (30 s): nobody is timed out here
    senders = [connected(path) for _ in range(63)]
    threads = [threading.Thread(target=_send_all, args=(sock,)) for sock in senders]
    try:
        for t in threads:
            t.start()
        max_line = 6 * (1 << 20) + (64 << 10)
        budget = 2 * max_line
        full = budget - (64 << 10)   # every sender waits for budget: less than one read of it is left
        stats = wait_for(lambda: (got := answered(path, {"op": "stats"})) and got["peak_buffered"] >= full and got,
                         60, "the senders to fill the shared budget")
    finally:
        for sock in senders:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(60)
        for sock in senders:
            sock.close()
        proc.kill()
        proc.wait()

    assert stats["buffer_bound"] == 64 * (64 << 10) + budget < 64 * len(HALF_A_LINE) // 8
    assert stats["peak_buffered"] <= stats["buffer_bound"] and stats["buffered"] <= stats["buffer_bound"]
    assert (stats["timed_out"], stats["evicted"], stats["connections"]) == (0, 0, 64)


def _send_all(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):   # the test shuts it down while it blocks
        sock.sendall(HALF_A_LINE)


def test_an_idle_connection_keeps_its_slot_until_a_new_one_needs_it(serve_short):
    path = serve_short
    first = Client(path)
    assert first.ask({"op": "list"})["ok"]            # served first, then idle the longest
    others = [Client(path) for _ in range(63)]
    try:
        assert all(c.ask({"op": "list"})["ok"] for c in others), "every slot taken, each served once"
        c = wait_for(lambda: _served(path), 60, "a new connection to take the idlest one's slot")
        stats = c.ask({"op": "stats"})
        c.close()
        assert end_of(first.sock) == b"", "the idlest was closed, told nothing (it asked nothing)"
        assert (stats["evicted"], stats["timed_out"], stats["connections"]) == (1, 0, 64)
        assert all(c.ask({"op": "list"})["ok"] for c in others), "the others kept theirs"
    finally:
        first.close()
        for c in others:
            c.close()


def _served(path: str) -> Client | None:
    """A connection the server answered (it stays open), or None when told busy."""
    c = Client(path)
    try:
        if c.ask({"op": "append", "harness": "codex", "session": "S", "text": "hi"}).get("ok"):
            return c
    except (OSError, ValueError):   # told busy and closed before the request went out
        pass
    c.close()
    return None


# ---------------------------------------------------------------- under journal supervise


def test_supervise_serves_cmd_through_its_socket_while_checkpoints_run(box):
    b = box()
    b.codex.mkdir()
    sup = b.supervise(cmd(b, "clients", str(b.session), "30", str(b.store_path)), interval=0.1)
    assert finish(sup) == 0, b.output()

    assert json.loads((b.run_dir / "env").read_text())["socket"] == b.input_socket
    answers = json.loads((b.run_dir / "answers").read_text())
    assert len(answers) == 300 and all(a["ok"] and not a["duplicate"] for a in answers), answers[:3]
    listed = list(log_of(b.store_path).list())
    assert len({i.id for i in listed}) == 300
    assert [i.seq for i in listed if i.session == "shared"] == list(range(1, 151))
    status = b.status()
    assert status["failed_ticks"] == 0 and status["last"]["seq"] >= 2, status
    assert len(manifest_seqs(b.store_path)) >= 2
    assert b.run("verify", "--full").returncode == 0
    assert not os.path.exists(b.input_socket) and status["input_socket"] == b.input_socket


def test_a_prompt_cmd_sends_after_its_stop_signal_is_stored_and_the_server_goes_with_cmd(box):
    b, sup = started(box, "last-words")
    server = server_pid(sup.pid)
    assert server is not None and alive(server)
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()

    last = json.loads((b.run_dir / "last").read_text())
    assert last["ok"] and [(i.id, i.size) for i in log_of(b.store_path).list()] == [(last["id"], 19)]
    assert not alive(server) and not os.path.exists(b.input_socket)


def test_a_server_that_dies_is_started_again_and_said_so(box):
    b, sup = started(box, "wait", interval=0.2)
    first = server_pid(sup.pid)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: "died of signal 9" in (b.status().get("input_error") or ""), 60, "the death to be recorded")
    again = wait_for(lambda: (pid := server_pid(sup.pid)) not in (None, first) and b.status().get("input_error")
                     is None and pid, 60, "a new server")
    c = Client(b.input_socket)
    assert c.ask({"op": "append", "harness": "codex", "session": "S", "text": "after the restart"})["seq"] == 1
    c.close()
    assert "not serving inputs: the input server died of signal 9" in b.output()
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0
    assert not alive(again)


def test_supervise_killed_with_sigkill_leaves_no_server_behind_and_served_with_one_thread(box):
    b, sup = started(box, "wait", interval=60)
    server = server_pid(sup.pid)
    threads = [line for line in Path(f"/proc/{sup.pid}/status").read_text().splitlines() if line.startswith("Threads")]
    assert threads == ["Threads:\t1"], "the socket is served by a child: the quiet snapshot's fork stays on (§10)"
    agent = [pid for pid, _, _ in cmd_children(sup.pid)]
    try:
        os.kill(sup.pid, signal.SIGKILL)
        wait_for(lambda: not alive(server), 60, "the server to follow its supervisor")
        assert not os.path.exists(b.input_socket)
    finally:
        for pid in agent:  # CMD outlives a supervisor killed with SIGKILL: the test ends it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("where", ["too long a path", "a file in the way", "a directory in the way"])
def test_a_socket_that_cannot_be_served_is_reported_and_cmd_runs_without_its_path(box, short_dir, where):
    """CMD gets ``$JOURNAL_INPUT_SOCKET`` only when something listens there: not the
    configured path (the variable supervise was given, here), nor the default one."""
    path, socket_path = short_dir / "input.sock", None
    if where == "a file in the way":
        path.write_text("mine")
        socket_path = str(path)
    elif where == "too long a path":
        path = short_dir / ("x" * 120)
        socket_path = str(path)

    def in_the_way(b):
        if where == "a directory in the way":   # at the path supervise serves by default
            Path(b.input_socket).mkdir(parents=True)
        return b

    b, sup = started(lambda: in_the_way(box()), "wait", socket_path=socket_path)
    error = b.status()["input_error"]
    assert ("over the 107 a Unix socket path may hold" if where == "too long a path" else "is not a socket") in error
    assert [p for p, _, _ in cmd_children(sup.pid)] and b.status_report()["supervisor"]["input_served"] is False
    assert json.loads((b.run_dir / "env").read_text())["socket"] is None, "no path to a socket nobody serves"
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0
    assert "supervise: not serving inputs:" in b.output()
    if where == "a file in the way":
        assert path.read_text() == "mine", "never removed"
    if where == "a directory in the way":
        assert Path(b.input_socket).is_dir(), "never removed"


def test_no_input_socket_starts_no_server_and_exports_no_path(box):
    b, sup = started(box, "wait", "--no-input-socket")
    assert server_pid(sup.pid) is None and proc_stat(sup.pid) is not None
    assert json.loads((b.run_dir / "env").read_text())["socket"] is None
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0


def test_a_stop_signal_while_the_server_waits_for_its_store_stops_supervise_before_cmd(box):
    """A store that does not answer keeps the server from listening: a stop signal then
    stops supervise at once (128+15), without starting CMD and without a server left."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)          # accepts (the kernel does) and never answers
    try:
        b = box()
        b.codex.mkdir()
        b.env.update(S3_ENV, JOURNAL_STORE=f"s3://bucket/p?endpoint=http://127.0.0.1:{silent.getsockname()[1]}"
                                           "&allow_http=true&region=us-east-1")
        sup = b.supervise(cmd(b, "wait"), "--no-restore")
        server = wait_for(lambda: server_pid(sup.pid), 60, "the input server to start")
        sup.send_signal(signal.SIGTERM)
        assert finish(sup) == 128 + signal.SIGTERM
        assert not (b.run_dir / "ready").exists() and not alive(server)
        assert "stopped by signal 15 before" in b.status()["last_error"]
    finally:
        silent.close()
