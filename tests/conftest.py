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

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from journal.checkpoint.run import CheckpointResult, checkpoint
from journal.cli.app import EXIT_FALLBACK
from journal.config import Config, load_config
from journal.repository.history import ManifestCache
from journal.format.model import BlobRef, Entry, Page, TreeRoot
from journal.format.objects import HEADER
from journal.repository.pack import pack_key
from journal.report import Collector
from journal.repository.repository import Repository
from journal.restore.run import RestoreResult, restore
from journal.store import open_store
from tools.reliability.damage import Crafter

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

    # --- a hostile writer: real records with the project's own encoders, hostile field values

    def crafter(self) -> Crafter:
        """``tools/reliability/damage.py``'s hostile writer, on this container's store."""
        return Crafter(self.store, self.home / "spool")

    def put_records(self, records: list[tuple[str, bytes, int]]) -> list[BlobRef]:
        return self.crafter().put_records(records)

    def chunk_entry(self, path: str, payload: bytes = b"hello\n", **fields) -> Entry:
        return self.crafter().chunk_entry(path, payload, **fields)

    def put_pages(self, *pages: Page) -> list[BlobRef]:
        return self.crafter().put_pages(*pages)

    def put_tree(self, entries: list[Entry]) -> BlobRef:
        return self.crafter().put_tree(entries)

    def publish(self, trees: dict[str, TreeRoot | None], **fields) -> int:
        return self.crafter().publish(trees, **fields)

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
                unprivileged: bool = False, memory: int | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m journal ARGS`` in a clean environment plus ``env``; with
    ``unprivileged``, bound by file modes as an ordinary user is (``drop_dac_override``);
    ``memory`` caps its address space (``RLIMIT_AS``, bytes)."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}

    def prepare() -> None:
        if unprivileged:
            drop_dac_override()
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-m", "journal", *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=prepare if unprivileged or memory else None)


#: Runs argv and prints its exit status and peak RSS (KiB). A process's peak RSS counts
#: the memory of the one it was forked from (Linux keeps the high-water mark across
#: exec), so the command is started by this fresh interpreter, not by pytest, whose
#: size grows with the tests run before.
_PEAK_RSS = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:], stdout=sys.stdout.buffer); "
             "print('', rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)")


def peak_rss(argv: list[str], env: dict[str, str], stdout: Path | None = None,
             stderr: Path | None = None) -> tuple[int, int]:
    """Run ``argv`` (with ``env`` over a clean environment) in a grandchild, its stdout
    into ``stdout`` (else discarded) and its stderr into ``stderr`` (else discarded);
    ``(exit status, its peak RSS in bytes)``."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    with open(stdout or os.devnull, "wb") as out, open(stderr or os.devnull, "wb") as err:
        done = subprocess.run([sys.executable, "-c", _PEAK_RSS, *argv], env={**base, **env}, stdout=out,
                              stderr=subprocess.PIPE, check=True)
        lines = done.stderr.splitlines()
        err.write(b"\n".join(lines[:-1]).rstrip())
    rc, peak_kib = map(int, lines[-1].split())
    return rc, peak_kib * 1024


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


#: What a command reading a crafted store may take: well over its needs on a sound store
#: (under 256 MiB), far under what an unbounded expansion or decompression takes.
CRAFTED_TIMEOUT = 60
CRAFTED_MEMORY = 512 << 20


def run_on_crafted(live: Live, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI on a crafted store, bounded in time and memory, and check it answers
    in one-line messages: no traceback, every line of stderr a message of its own."""
    proc = run_journal(*args, env=live.env, timeout=CRAFTED_TIMEOUT, memory=CRAFTED_MEMORY)
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert all(line.startswith(("journal: error: ", "warning: ", "restore")) for line in lines), proc.stderr
    assert sum(line.startswith("journal: error: ") for line in lines) <= 1, proc.stderr
    return proc


class Audit:
    """What the CLI made of a crafted store: ``verify --full --json``, ``restore`` into a
    new container (``fresh``) and ``gc --dry-run``, each run by ``run_on_crafted``."""

    def __init__(self, live: Live, make_live):
        self.fresh = make_live("fresh", fixtures=False)
        before = _files_outside(live.home.parent, self.fresh.local)
        self.verify = run_on_crafted(live, "verify", "--full", "--json")
        self.restore = run_on_crafted(self.fresh, "restore")
        self.gc = run_on_crafted(live, "gc", "--dry-run", "--keep-last", "1")
        # Nothing was written anywhere but the new container's trees and state: not the
        # store, not the other container, not beside either.
        assert _files_outside(live.home.parent, self.fresh.local) == before

    @property
    def findings(self) -> list[dict]:
        """verify's errors (the crafted objects' packs are unreferenced too: warnings)."""
        return [f for f in json.loads(self.verify.stdout)["findings"] if f["severity"] == "error"]

    def assert_falls_back(self, kind: str, detail: str, tree: str = "codex", seq: int = 2,
                          gc_blocked: bool = True) -> None:
        """verify finds what is wrong with ``tree`` in manifest ``seq`` (one finding of
        ``kind`` naming ``detail``); restore takes that tree from the manifest before
        and says so (a fallback: exit 3); gc deletes nothing while the kept manifest is
        damaged (``gc_blocked``: a page breaks the rules on its own), or goes on (pages
        that disagree with one another: gc reads each page once whatever they say of
        one another)."""
        assert self.verify.returncode == 1
        assert [(f["kind"], f["manifest"]) for f in self.findings] == [(kind, seq)], self.findings
        assert detail in self.findings[0]["detail"], self.findings
        assert self.restore.returncode == EXIT_FALLBACK, self.restore.stderr
        assert f"{tree}: restored from checkpoint {seq - 1}" in self.restore.stdout
        assert f"manifest {seq} unusable" in self.restore.stderr and detail in self.restore.stderr
        if gc_blocked:
            assert self.gc.returncode == 1 and f"gc: checkpoint {seq} (tree {tree}) needs an object" in self.gc.stderr
        else:
            assert self.gc.returncode == 0, self.gc.stderr


def _files_outside(root: Path, target: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file() and target not in p.parents}


@pytest.fixture(name="run_journal")
def run_journal_fixture():
    """The CLI runner: ``run_journal(*args, env={...})``."""
    return run_journal


@contextlib.contextmanager
def scratch_dir(fallback: Path):
    """A new directory on tmpfs when possible (many small files, cheap fsync), removed
    at the end; else ``fallback``."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="journal-test-", dir="/dev/shm"))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    else:
        yield fallback


@pytest.fixture
def root(tmp_path):
    """A scratch directory; on tmpfs when possible (``scratch_dir``)."""
    with scratch_dir(tmp_path) as path:
        yield path


def live_maker(base: Path):
    """``make(name, fixtures=True)``: a container in ``base / name`` on the store ``base / "store"``."""
    def make(name: str = "a", *, fixtures: bool = True) -> Live:
        live = Live(base / name, base / "store")
        if fixtures:
            copy_fixtures(live.local)
        return live
    return make


@pytest.fixture
def make_live(tmp_path):
    """``make_live(name, fixtures=True)``: another container on this test's store."""
    return live_maker(tmp_path)


@pytest.fixture
def live(make_live) -> Live:
    return make_live("a")


@pytest.fixture
def bare_live(make_live) -> Live:
    """A container whose ``$AM_LOCAL`` starts empty."""
    return make_live("a", fixtures=False)
