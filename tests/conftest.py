"""Shared fixtures: a live agent-state tree on local disk, a local store, the CLI.

``live`` copies the real transcripts of ``tests/fixtures/real`` (laid out as
under ``$AM_LOCAL``) into ``tmp_path/a/local`` and pairs them with a store at
``tmp_path/store``. ``make_live`` builds more of them; every one made in a test
shares that test's store, as containers sharing one bucket do.

Tests wait on events, not on the clock: ``wait_for`` polls for a file, a status
change or a log line, and ``FakeClock`` stands in for the wall clock of code that
takes one (the gc lease), so no test depends on how fast this machine is.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from journal.checkpoint import CheckpointResult, checkpoint
from journal.config import Config, load_config
from journal.history import ManifestCache
from journal.model import Entry
from journal.objects import HEADER
from journal.pack import pack_key
from journal.report import Collector
from journal.repository import Repository
from journal.restore import RestoreResult, restore
from journal.store import open_store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real"
HARNESS_DIRS = ("codex-home", "agent-state", "oc-home")


def gemini_record(i: int, text: str | None = None) -> bytes:
    """One Gemini CLI chat record, as one JSONL line."""
    kind = "user" if i % 2 == 0 else "gemini"
    body = json.dumps({"id": f"msg-{i:04d}", "timestamp": f"2026-03-01T10:{i // 60:02d}:{i % 60:02d}.000Z",
                       "type": kind, "content": text or f"message {i} " + "lorem ipsum " * (i % 7)})
    return body.encode() + b"\n"


class Live:
    """One container's view: a local root, its state dir, and the shared store."""

    def __init__(self, home: Path, store_path: Path):
        self.home = home
        self.local = home / "local"
        self.store_path = store_path
        self.env = {"AM_LOCAL": str(self.local), "JOURNAL_STORE": str(store_path), "HOME": str(home),
                    "XDG_CONFIG_HOME": str(home / ".config")}
        self.store = open_store(str(store_path))
        self.warnings: list[str] = []
        self.local.mkdir(parents=True, exist_ok=True)

    gemini_record = staticmethod(gemini_record)

    @property
    def cfg(self) -> Config:
        """The effective config now (presets are picked by which live paths exist)."""
        return load_config(env=self.env)

    @property
    def state_file(self) -> Path:
        return self.local / ".journal" / "state.msgpack"

    def checkpoint(self, **kwargs) -> CheckpointResult:
        reporter = Collector()
        try:
            return checkpoint(self.cfg, self.store, reporter, **kwargs)
        finally:
            self.warnings = reporter.warnings

    def restore(self, **kwargs) -> RestoreResult:
        reporter = Collector()
        try:
            return restore(self.cfg, self.store, reporter, **kwargs)
        finally:
            self.warnings = reporter.warnings

    def run(self, *args: str, unprivileged: bool = False) -> subprocess.CompletedProcess:
        return run_journal(*args, env=self.env, unprivileged=unprivileged)

    def repo(self) -> Repository:
        return Repository.open(open_store(str(self.store_path)))

    def entries(self, tree: str, seq: int | None = None) -> dict[str, Entry]:
        """The entries of ``tree`` in manifest ``seq`` (default: the newest), by path."""
        repo = self.repo()
        seq = seq if seq is not None else repo.manifest_seqs()[-1]
        found, _ = ManifestCache(repo).tree(seq, tree)
        return {e.path: e for e in found}

    def pack_file(self, pack: str) -> Path:
        return self.store_path / pack_key(pack)

    def corrupt_blob(self, ref) -> None:
        """Flip one byte inside the compressed payload of one stored blob."""
        path = self.pack_file(ref.pack)
        data = bytearray(path.read_bytes())
        data[ref.offset + HEADER.size + (ref.length - HEADER.size) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    def add_gemini_tree(self) -> Path:
        """A Gemini CLI home (v0.39+ JSONL chats, ``logs.json``); returns the chat file."""
        gemini = self.local / "agent-state" / "gemini-home" / ".gemini"
        chats = gemini / "tmp" / "3f1c0a9e" / "chats"
        chats.mkdir(parents=True)
        chat = chats / "session-2026-03-01T10-00-a1b2c3d4.jsonl"
        chat.write_bytes(b"".join(gemini_record(i) for i in range(40)))
        (gemini / "logs.json").write_text('[{"sessionId": "a1b2c3d4", "messageId": 0, "type": "user"}]\n')
        (gemini / "settings.json").write_text('{"theme": "Default"}')
        (gemini / "settings.json").chmod(0o600)
        return chat

    @staticmethod
    def snapshot(root: Path) -> dict[str, tuple]:
        """Every path under ``root`` with what restore must keep: bytes, mode, mtime, link target."""
        snap = {}
        for path in sorted(root.rglob("*")):
            rel = str(path.relative_to(root))
            if rel.split("/")[0] == ".journal":
                continue
            st = path.lstat()
            if path.is_symlink():
                snap[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                snap[rel] = ("dir", st.st_mode)
            else:
                snap[rel] = ("file", path.read_bytes(), st.st_mode, st.st_mtime_ns)
        return snap


def copy_fixtures(local: Path) -> None:
    for name in HARNESS_DIRS:
        shutil.copytree(FIXTURES / name, local / name, symlinks=True)
    for path in [local, *local.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


def run_journal(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
                unprivileged: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m journal ARGS`` in a clean environment plus ``env``; with
    ``unprivileged``, bound by file modes as an ordinary user is (``drop_dac_override``)."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    return subprocess.run([sys.executable, "-m", "journal", *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=drop_dac_override if unprivileged else None)


_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def drop_dac_override() -> None:
    """A ``preexec_fn``: the child runs without ``CAP_DAC_OVERRIDE`` and
    ``CAP_DAC_READ_SEARCH`` (dropped from its bounding set, so ``exec`` does not give
    them back to root), so a directory at mode 000 refuses it with ``EACCES`` as it
    refuses an unprivileged user. It stays uid 0, so it can still run this
    interpreter, which lives under root's 0700 home. A non-root child needs nothing."""
    if os.geteuid() != 0:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.fixture
def small_tmpfs(tmp_path):
    """``small_tmpfs(size, ro=False)``: a new tmpfs of ``size`` (e.g. "1m") mounted on a
    directory under ``tmp_path``, unmounted at the end; skips where mounting is refused."""
    mounted: list[Path] = []

    def mount(size: str, *, ro: bool = False) -> Path:
        point = tmp_path / f"tmpfs-{len(mounted)}"
        point.mkdir()
        opts = f"size={size}" + (",ro" if ro else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(point)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=True)


def wait_for(pred, timeout: float, what: str, step: float = 0.01):
    """Poll ``pred`` until it returns something true, and return that; fail the test
    naming ``what`` after ``timeout`` seconds. The timeout only bounds a failing test:
    make it generous (a busy machine stalls for seconds), never a measurement."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` for a child a test sends SIGINT: Ctrl-C's default disposition. A
    shell starts background jobs with SIGINT ignored and children inherit that, so in
    a suite run in the background the child would ignore it; at a terminal it gets it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class FakeClock:
    """A wall clock in nanoseconds (as ``time.time_ns``) that moves only when the test
    calls ``advance``; it starts at the real time."""

    def __init__(self) -> None:
        self.ns = time.time_ns()

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


@pytest.fixture(name="run_journal")
def run_journal_fixture():
    """The CLI runner: ``run_journal(*args, env={...})``."""
    return run_journal


@pytest.fixture
def root(tmp_path):
    """A scratch directory; on tmpfs when possible (many small files, cheap fsync)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="journal-test-", dir="/dev/shm"))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture
def make_live(tmp_path):
    """``make_live(name, fixtures=True)``: another container on this test's store."""
    def make(name: str = "a", *, fixtures: bool = True) -> Live:
        live = Live(tmp_path / name, tmp_path / "store")
        if fixtures:
            copy_fixtures(live.local)
        return live
    return make


@pytest.fixture
def live(make_live) -> Live:
    return make_live("a")


@pytest.fixture
def bare_live(make_live) -> Live:
    """A container whose ``$AM_LOCAL`` starts empty."""
    return make_live("a", fixtures=False)
