"""The harness shared by the ``journal supervise`` tests: a "container" (``Supervised``,
a ``Live``) with its own local root, state dir and environment over a shared local
store, and /proc and store helpers. Each test module brings its own supervised writer script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from journal.paths import INPUT_SOCKET

from conftest import JOURNAL, Live, wait_for

INTERVAL = 0.3
SESSION = "sessions/2026/03/01/rollout-1.jsonl"        # relative to codex-home (the ``codex`` preset)
STRAY_ENV = ("JOURNAL_CONFIG", "JOURNAL_STATE_DIR", "JOURNAL_STORE", "AM_LOCAL", "AGENT_STATE_CHECKPOINT_SECONDS",
             "XDG_CONFIG_HOME", "XDG_DATA_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_LIVE", "GEMINI_CLI_HOME",
             "OPENCLAW_STATE_DIR", "OPENCODE_LIVE", "HERMES_LIVE", "HERMES_HOME", "FX_LIVE", "JOURNAL_INPUT_SOCKET",
             "JOURNAL_INPUT_LIMIT", "JOURNAL_CHUNK_COPIES_LIMIT")
#: The longest path a Unix socket address holds: a box whose state directory is deeper
#: than that serves its input socket from a short temp directory of its own.
SUN_PATH_MAX = 107


class Supervised(Live):
    """One "container" (``root``: ``base/name``) whose agent runs under ``journal
    supervise``: ``$AM_LOCAL`` (``root/local``) with a Codex home, HOME ``root/home``, a
    (possibly shared) store, and this process's environment less any journal variable
    (``env`` is whole: ``subprocess`` takes it as it is).

    ``writer`` is the supervised agent's script, run as ``writer.py SESSION PERIOD MODE
    RUNDIR``; it writes its pid to ``RUNDIR/child-pid`` (and any pid it starts to
    ``RUNDIR/pids``) and touches ``RUNDIR/child-ready`` after its third line."""

    def __init__(self, base: Path, store: Path, name: str, writer: str):
        self.root = base / name
        super().__init__(self.root / "home", store, local=self.root / "local", env={"PYTHONUNBUFFERED": "1"})
        self.run_dir = self.root / "run"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**{k: v for k, v in os.environ.items() if k not in STRAY_ENV}, **self.env}
        self.socket_dir: str | None = None
        if len(os.fsencode(self.state_dir / INPUT_SOCKET)) > SUN_PATH_MAX:
            self.socket_dir = tempfile.mkdtemp(prefix="jis-")
            self.env["JOURNAL_INPUT_SOCKET"] = os.path.join(self.socket_dir, "input.sock")
        self.writer = self.root / "writer.py"
        self.writer.write_text(writer)
        self.procs: list[subprocess.Popen] = []

    @property
    def session(self) -> Path:
        return self.codex / SESSION

    @property
    def status_file(self) -> Path:
        return self.state_dir / "status.json"

    def writer_cmd(self, mode: str, period: float = 0.05, *, make_tree: bool = True) -> list[str]:
        if make_tree:  # the tree exists before supervise starts (active from the first tick)
            self.session.parent.mkdir(parents=True, exist_ok=True)
        return [sys.executable, str(self.writer), str(self.session), str(period), mode, str(self.run_dir)]

    def supervise(self, cmd: list[str], *opts: str, interval: float = INTERVAL, prefix: list[str] | None = None,
                  tag: str = "supervise", preexec_fn=None) -> subprocess.Popen:
        args = (prefix or []) + JOURNAL + ["supervise", "--interval", str(interval), *opts, "--", *cmd]
        out = open(self.root / f"{tag}.out", "wb")
        err = open(self.root / f"{tag}.err", "wb")
        proc = subprocess.Popen(args, env=self.env, stdout=out, stderr=err, cwd=self.root, start_new_session=True,
                                preexec_fn=preexec_fn)
        out.close()
        err.close()
        self.procs.append(proc)
        return proc

    def output(self, tag: str = "supervise") -> str:
        return (self.root / f"{tag}.out").read_text() + (self.root / f"{tag}.err").read_text()

    def status(self, status_file: Path | None = None) -> dict:
        try:
            return json.loads((status_file or self.status_file).read_text())
        except (FileNotFoundError, json.JSONDecodeError, PermissionError):
            return {}

    def status_report(self) -> dict:
        return json.loads(self.run("status", "--json", expect=0).stdout)

    def child_pid(self) -> int:
        return int((self.run_dir / "child-pid").read_text())

    def wait_ready(self, proc: subprocess.Popen, *, checkpoints: int = 1, timeout: float = 15,
                   status_file: Path | None = None) -> dict:
        """Wait until the child runs and supervise has committed at least ``checkpoints`` manifests."""
        def ready():
            if proc.poll() is not None:
                pytest.fail(f"supervise exited early ({proc.returncode}):\n{self.output()}")
            st = self.status(status_file)
            return (st.get("child_pid") and (self.run_dir / "child-ready").exists()
                    and len(manifest_seqs(self.store_path)) >= checkpoints) and st
        return wait_for(ready, timeout, "the child to run and supervise to checkpoint")

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
        pids = []
        for name in ("child-pid", "pids"):
            try:
                pids += (self.run_dir / name).read_text().split()
            except FileNotFoundError:
                pass
        for pid in pids:
            kill_if_alive(int(pid), signal.SIGKILL)
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    @property
    def input_socket(self) -> str:
        """Where supervise serves the input journal for CMD."""
        return self.env.get("JOURNAL_INPUT_SOCKET") or str(self.state_dir / INPUT_SOCKET)


def boxes(tmp_path: Path, writer: str):
    """The body of a ``box`` fixture: yields ``make(name, base=None) -> Supervised`` (every box
    shares ``<base>/store``) and kills whatever the boxes started afterwards."""
    made: list[Supervised] = []

    def make(name: str = "box", base: Path | None = None) -> Supervised:
        b = Supervised(base or tmp_path, (base or tmp_path) / "store", name, writer)
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop_all()


def kill_if_alive(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def proc_stat(pid: int) -> tuple[str, int, str, int] | None:
    """(state, ppid, comm, pgrp) of a pid from /proc, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    comm = raw[raw.index("(") + 1:raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), comm, int(fields[2])


def alive(pid: int) -> bool:
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def children_of(ppid: int) -> list[tuple[int, str, str]]:
    """(pid, state, comm) of every process whose parent is ``ppid``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None and st[1] == ppid:
                found.append((int(name), st[0], st[2]))
    return found


def cmd_children(ppid: int) -> list[tuple[int, str, str]]:
    """``children_of(ppid)`` less the input server a supervisor runs beside CMD
    (``journal input serve``, design §20)."""
    return [child for child in children_of(ppid) if not is_input_server(child[0])]


def is_input_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"\0input\0serve\0" in fh.read()
    except OSError:
        return False


def flock_holders(path: Path) -> set[int]:
    """Pids holding a flock on ``path``, from /proc/locks (without touching the lock)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return set()
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holders = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter
            continue
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == want:
            holders.add(int(fields[4]))
    return holders


def manifest_seqs(store: Path) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(store / "manifests") if n.isdigit())
    except (FileNotFoundError, NotADirectoryError):
        return []


def complete_lines(data: bytes) -> bytes:
    """Everything up to and including the last newline."""
    return data[:data.rfind(b"\n") + 1]


def parse_lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def restore_to(box_factory, name: str = "restorer", base: Path | None = None) -> Path:
    """Restore the shared store into an empty directory from a fresh container."""
    fresh = box_factory(name, base)
    dest = fresh.root / "out"
    proc = fresh.run("restore", "--to", str(dest))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


def restored_session(dest: Path) -> bytes:
    path = dest / "codex" / SESSION
    assert path.exists(), f"the store holds no {SESSION}; restored: {sorted(str(p) for p in dest.rglob('*'))}"
    return path.read_bytes()


def assert_not_torn(data: bytes) -> list[dict]:
    assert data.endswith(b"\n"), f"restored transcript ends in a torn line: {data[-80:]!r}"
    lines = parse_lines(data)
    assert [r["n"] for r in lines] == list(range(1, len(lines) + 1)), "restored lines are not 1..N in order"
    return lines


def verify_clean(box: Supervised) -> None:
    proc = box.run("verify", "--full")
    assert proc.returncode == 0, f"journal verify --full found problems:\n{proc.stdout}{proc.stderr}"


def assert_store_clean(box: Supervised) -> None:
    verify_clean(box)
    seqs = manifest_seqs(box.store_path)
    assert seqs == list(range(1, len(seqs) + 1)), f"manifest seqs are not contiguous: {seqs}"


def finish(proc: subprocess.Popen, timeout: float = 30) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"supervise (pid {proc.pid}) did not exit within {timeout}s")
