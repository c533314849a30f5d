"""A container, as the tests see one: ``Live``.

A container is a local root (``$AM_LOCAL``, with journal's state under ``.journal``),
a private ``HOME``, and a store that other containers of the same test may share, as
containers sharing one bucket do. ``Live`` drives journal there through the real CLI
(``run``, ``popen``) and through the library (``checkpoint``, ``restore``, ``repo``),
and can write the store as a hostile writer would (``put_records``, ``publish``).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

import msgspec

from journal.checkpoint.run import CheckpointResult, checkpoint
from journal.config import Config, load_config
from journal.format.model import BlobRef, Entry, Manifest, Page, TreeRoot
from journal.format.objects import HEADER
from journal.format.pagemap import load_snapshot
from journal.gc.retention import Policy
from journal.gc.run import TOMBSTONE_PREFIX, GcResult, Tombstone, gc
from journal.repository.history import ManifestCache
from journal.repository.repository import Repository, pack_key
from journal.report import Collector
from journal.restore.run import RestoreResult, restore
from journal.store import Store, open_store
from tools.reliability.damage import Crafter

from .cli import JOURNAL, clean_env, journal_script, run_journal

#: The real transcripts the tests use, laid out as under ``$AM_LOCAL``.
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "real"
HARNESS_DIRS = ("codex-home", "agent-state", "oc-home")

#: ``Live.run``'s ``expect`` when a call names none: the container's own default.
_DEFAULT = object()


def container_env(local: Path, store: str | Path, home: Path, **extra: str) -> dict[str, str]:
    """The variables that make a container: its local root, its store, a private HOME
    and config dir (so no user config is read), and ``extra``."""
    return {"AM_LOCAL": str(local), "JOURNAL_STORE": str(store), "HOME": str(home),
            "XDG_CONFIG_HOME": str(Path(home) / ".config"), **extra}


def copy_fixtures(local: Path) -> None:
    """The real transcripts, writable, under ``local`` (laid out as under ``$AM_LOCAL``)."""
    for name in HARNESS_DIRS:
        shutil.copytree(FIXTURES / name, local / name, symlinks=True)
    for path in [local, *local.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


def gemini_record(i: int, text: str | None = None) -> bytes:
    """One Gemini CLI chat record, as one JSONL line."""
    kind = "user" if i % 2 == 0 else "gemini"
    body = json.dumps({"id": f"msg-{i:04d}", "timestamp": f"2026-03-01T10:{i // 60:02d}:{i % 60:02d}.000Z",
                       "type": kind, "content": text or f"message {i} " + "lorem ipsum " * (i % 7)})
    return body.encode() + b"\n"


def golden_cli(tmp_path: Path, store: str | Path) -> Live:
    """An empty container on ``tmp_path`` pointed at ``store`` (a golden store's copy),
    running the installed CLI."""
    return Live(tmp_path / "home", store, local=tmp_path / "local", cmd=journal_script())


def store_dir(url: str) -> Path | None:
    """The directory a store URL names (a path, ``file://``, ``hfsim://``); None for a cloud store."""
    parts = urlsplit(url)
    if parts.scheme in ("file", "hfsim"):
        return Path(unquote(parts.path))
    return None if parts.scheme else Path(url)


class Live:
    """One container's view: a local root, its state dir, and the (shared) store.

    ``home`` is its private HOME; ``local`` its ``$AM_LOCAL`` (``home/local`` unless
    given; made unless ``make_local`` is false); ``store`` a path or a store URL. ``env``
    adds variables to the container's environment; with ``fixtures`` its ``$AM_LOCAL``
    starts with a copy of the real transcripts. ``run`` asserts the exit status
    ``expect`` (None: nothing) unless a call names its own; ``cmd`` is the CLI it runs
    (``python -m journal`` unless given, e.g. ``journal_script()``)."""

    gemini_record = staticmethod(gemini_record)

    def __init__(self, home: Path, store: str | Path, *, local: Path | None = None,
                 env: dict[str, str] | None = None, make_local: bool = True, fixtures: bool = False,
                 expect: int | None = None, cmd: list[str] | None = None):
        self.home = Path(home)
        self.local = Path(local) if local is not None else self.home / "local"
        self.store_url = str(store)
        self.store_path = store_dir(self.store_url)
        self.env = container_env(self.local, self.store_url, self.home, **(env or {}))
        self.expect = expect
        self.cmd = list(cmd or JOURNAL)
        self.warnings: list[str] = []
        self.home.mkdir(parents=True, exist_ok=True)
        if make_local:
            self.local.mkdir(parents=True, exist_ok=True)
        if fixtures:
            copy_fixtures(self.local)

    # --- where things are

    @property
    def cfg(self) -> Config:
        """The effective config now (presets are picked by which live paths exist)."""
        return load_config(env=self.env)

    @property
    def state_dir(self) -> Path:
        return self.local / ".journal"

    @property
    def codex(self) -> Path:
        """The Codex home (``$AM_LOCAL/codex-home``: the ``codex`` preset's tree)."""
        return self.local / "codex-home"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.msgpack"

    @functools.cached_property
    def store(self) -> Store:
        """The store, opened in this process (once)."""
        return open_store(self.store_url)

    def write(self, rel: str, data: bytes | str) -> Path:
        """Write a live file (its directories made as needed); its path."""
        path = self.local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def append(self, rel: str, data: bytes | str) -> None:
        path = self.local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)

    # --- the CLI

    def run(self, *args: str, env: dict[str, str] | None = None, expect=_DEFAULT, timeout: float = 120,
            unprivileged: bool = False, memory: int | None = None, cmd: list[str] | None = None,
            stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
        """``journal ARGS`` (or ``cmd ARGS``) in this container (plus ``env``, with
        ``stdin`` on its standard input if given); asserts the exit status ``expect``
        (the container's default unless given; None asserts nothing)."""
        proc = run_journal(*args, env={**self.env, **(env or {})}, timeout=timeout, unprivileged=unprivileged,
                           memory=memory, cmd=cmd or self.cmd, stdin=stdin)
        expect = self.expect if expect is _DEFAULT else expect
        if expect is not None:
            assert proc.returncode == expect, \
                f"journal {' '.join(args)} exited {proc.returncode}, not {expect}:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def checkpoint_ok(self) -> dict:
        """``journal checkpoint --json``, which must succeed; its report."""
        return json.loads(self.run("checkpoint", "--json", expect=0).stdout)

    def log(self) -> list[dict]:
        """``journal log --json``, which must succeed: every manifest, newest first."""
        return json.loads(self.run("log", "--json", expect=0).stdout)

    def popen(self, *args: str, cmd: list[str] | None = None, env: dict[str, str] | None = None,
              **kwargs) -> subprocess.Popen:
        """``journal ARGS`` (or ``cmd ARGS``) started in this container, its output piped
        (as text) unless ``kwargs`` say otherwise."""
        kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **kwargs}
        return subprocess.Popen([*(cmd or self.cmd), *args], env=clean_env({**self.env, **(env or {})}), **kwargs)

    # --- the library

    def checkpoint(self, store: Store | None = None, **kwargs) -> CheckpointResult:
        reporter = Collector()
        try:
            return checkpoint(self.cfg, store or self.store, reporter, **kwargs)
        finally:
            self.warnings = reporter.warnings

    def restore(self, store: Store | None = None, **kwargs) -> RestoreResult:
        reporter = Collector()
        try:
            return restore(self.cfg, store or self.store, reporter, **kwargs)
        finally:
            self.warnings = reporter.warnings

    def gc(self, grace: float = 0.0, *, store: Store | None = None, **policy) -> GcResult:
        """gc with the retention ``policy`` (``Policy``'s fields) and ``grace`` seconds."""
        return gc(self.repo(store), Policy(**policy), grace)

    def tombstones(self) -> dict[str, Tombstone]:
        """The store's gc tombstones, by key."""
        return {k: msgspec.json.decode(self.store.get(k), type=Tombstone) for k in self.store.list(TOMBSTONE_PREFIX)}

    def repo(self, store: Store | None = None) -> Repository:
        """The repository, on a store opened afresh (or ``store``)."""
        return Repository.open(store or open_store(self.store_url), key=self.cfg.key)

    def seqs(self) -> list[int]:
        return self.repo().manifest_seqs()

    def manifest(self, seq: int) -> Manifest:
        return self.repo().load_manifest(seq)[0]

    def keys(self, prefix: str = "") -> set[str]:
        return set(self.store.list(prefix))

    def entries(self, tree: str, seq: int | None = None) -> dict[str, Entry]:
        """The entries of ``tree`` in manifest ``seq`` (default: the newest), by path."""
        repo = self.repo()
        seq = seq if seq is not None else repo.manifest_seqs()[-1]
        found, _ = ManifestCache(repo).tree(seq, tree)
        return {e.path: e for e in found}

    def stored_bytes(self, tree: str, path: str, seq: int | None = None) -> bytes:
        """The bytes a checkpoint holds for ``path`` of ``tree``."""
        repo = self.repo()
        return b"".join(repo.read_blob(ref) for ref in self.entries(tree, seq)[path].refs)

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

    # --- live trees

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


class CodexLive(Live):
    """A container on one scratch directory ``root``: ``root/local`` (its ``$AM_LOCAL``,
    holding a Codex home: the ``codex`` preset), ``root/home`` and, unless ``store``
    names another, the store ``root/store``. ``write`` and ``append`` take paths in the
    Codex home. ``kwargs`` are ``Live``'s."""

    def __init__(self, root: Path, store: str | Path | None = None, **kwargs):
        super().__init__(root / "home", store or root / "store", local=root / "local", **kwargs)
        self.root = root
        self.codex.mkdir(parents=True, exist_ok=True)

    def write(self, rel: str, data: bytes | str) -> Path:
        return super().write(f"codex-home/{rel}", data)

    def append(self, rel: str, data: bytes | str) -> None:
        super().append(f"codex-home/{rel}", data)


class OpencodeLive(Live):
    """A container whose live tree is opencode's (``$AM_LOCAL/opencode-share``, the
    ``opencode`` preset), made now, holding its database ``db`` (``opencode.db``).
    ``kwargs`` are ``Live``'s; ``XDG_DATA_HOME`` is ``home/.data``."""

    TREE, DB = "opencode", "opencode.db"

    def __init__(self, home: Path, store: str | Path, **kwargs):
        kwargs["env"] = {"XDG_DATA_HOME": str(Path(home) / ".data"), **kwargs.get("env", {})}
        super().__init__(home, store, **kwargs)
        self.db.parent.mkdir(parents=True, exist_ok=True)

    @property
    def db(self) -> Path:
        return self.local / "opencode-share" / self.DB

    def tick(self) -> int | None:
        """An in-process checkpoint, with no warning; the new seq, or None when nothing
        changed."""
        result = self.checkpoint()
        assert not self.warnings and not result.warnings, (result, self.warnings)
        return result.seq

    def entry(self, seq: int | None = None) -> Entry:
        """The database's entry in manifest ``seq`` (default: the newest)."""
        return self.entries(self.TREE, seq)[self.DB]

    def db_snapshot(self, seq: int | None = None):
        """The database's snapshot (its page map) in manifest ``seq`` (default: the newest)."""
        return load_snapshot(self.entry(seq).refs, self.repo().read_blob)
