"""``journal mount DIR`` (``journal/browse/mount/``, docs/design.md §19 "mount"): every
checkpoint as a read-only file system, on a real FUSE mount in its own process.

What the mount shows is what ``restore --to`` writes for the same checkpoint: the same
``ls -R``, the same bytes, modes (less the write bits), mtimes and link targets, and a
database that ``sqlite3`` opens. Damage fails only the file it is in (EIO), and the
mount comes down cleanly however it is unmounted. Memory is counted in-process, over
the same file system object the mount serves: what it keeps stays within its limits
on a store of 1,000 checkpoints.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import errno
import os
import select
import shutil
import signal
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from journal.format.model import KIND_DIR, Fork, Manifest, TreeRoot
from journal.report import Collector
from journal.repository.repository import Repository, encode_manifest, manifest_key, utc_now
from journal.restore.export import MARK
from journal.store import open_store

from conftest import FIXTURES, JOURNAL, Live, clean_env, one_line_error, run_journal, scratch_dir
from test_browse import ROLLOUT, SESSIONS, _copy_to_bucket, _database, time_between, write
from test_gc import CountingStore

pytest_plugins = ["tests.s3server"]

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount") is None
    or not (ctypes.util.find_library("fuse") or ctypes.util.find_library("fuse3")),
    reason="needs /dev/fuse, fusermount and libfuse (Debian's fuse3 package)")

DB = "opencode/opencode.db"


class Mounted:
    """``journal mount`` of ``live``'s store at ``point``, in its own process, its temp
    files in ``tmp`` ($TMPDIR); up once its one line is printed."""

    def __init__(self, live: Live, point: Path, tmp: Path, *args: str):
        point.mkdir()
        tmp.mkdir()
        self.point, self.tmp = point, tmp
        self.proc = subprocess.Popen([*JOURNAL, "mount", str(point), *args],
                                     env=clean_env({**live.env, "TMPDIR": str(tmp)}), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        readable, _, _ = select.select([self.proc.stdout], [], [], 60)
        assert readable, "the mount printed nothing in 60 s"
        self.line = self.proc.stdout.readline()
        assert self.line.startswith("mounted "), self.line + self.proc.stderr.read()
        assert os.path.ismount(point)

    def stop(self, sig: str = "SIGTERM") -> tuple[int, str]:
        """Unmount it with signal ``sig``; its exit status and stderr."""
        self.proc.send_signal(getattr(signal, sig))
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err

    def close(self) -> None:
        if os.path.ismount(self.point):
            subprocess.run(["fusermount", "-u", "-z", str(self.point)], capture_output=True)
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.communicate(timeout=60)


@pytest.fixture
def mount(tmp_path) -> Iterator:
    """``mount(live, *args)``: a ``Mounted`` at ``tmp_path/mnt-K``, unmounted at the end."""
    made: list[Mounted] = []

    def start(live: Live, *args: str) -> Mounted:
        n = len(made)
        made.append(Mounted(live, tmp_path / f"mnt-{n}", tmp_path / f"tmp-{n}", *args))
        return made[-1]

    yield start
    for mounted in made:
        mounted.close()


# --------------------------------------------------------------------------- stores


def _history(live: Live, base: Path) -> dict:
    """Checkpoint 1: the real Codex transcripts, a 2.5 MiB random file (three chunks), a
    symlink and a WAL database; checkpoint 2 appends to a transcript, adds rows and a
    file. Each exported by ``restore --to``."""
    home = live.local / "codex-home"
    shutil.copytree(FIXTURES / "codex-home", home)
    (live.local / SESSIONS / ROLLOUT).chmod(0o644)
    write(home / "big.bin", os.urandom(5 << 19))
    os.symlink("sessions/2026", home / "link")
    _database(live.local / "opencode-share" / "opencode.db", 2000)
    assert live.checkpoint().seq == 1
    with open(live.local / SESSIONS / ROLLOUT, "ab") as fh:
        fh.write(live.gemini_record(1))
    _database(live.local / "opencode-share" / "opencode.db", 300)
    write(home / "late.txt", b"late\n")
    assert live.checkpoint().seq == 2
    exports = {}
    for seq in (1, 2):
        exports[seq] = base / f"export-{seq}"
        assert live.restore(to=str(exports[seq]), at=str(seq)).complete
    return {"live": live, "exports": exports}


@pytest.fixture(scope="module")
def local_history(tmp_path_factory) -> Iterator[dict]:
    with scratch_dir(tmp_path_factory.mktemp("mount-local")) as base:
        yield _history(Live(base / "a", base / "store"), base)


@pytest.fixture(scope="module")
def s3_history(local_history, tmp_path_factory, s3_server) -> dict:
    """``local_history``'s store copied to a bucket, object by object: the same checkpoints on S3."""
    bucket = s3_server.new_bucket()
    _copy_to_bucket(local_history["live"], bucket)
    live = Live(tmp_path_factory.mktemp("mount-s3"), bucket.url, env=s3_server.env)
    return {"live": live, "exports": local_history["exports"]}


def _same_as_export(mounted: Path, export: Path) -> None:
    """``mounted`` holds what ``export`` does: ``ls -R``, and for each path its kind, bytes,
    mode (without write bits), mtime and link target."""
    def ls(root: Path) -> str:
        return subprocess.run(["ls", "-R"], cwd=root, capture_output=True, text=True, check=True).stdout

    assert ls(mounted) == ls(export)
    for path in sorted(export.rglob("*")):
        rel = path.relative_to(export)
        if rel.name == MARK:
            continue
        there = mounted / rel
        want, got = path.lstat(), there.lstat()
        assert stat.S_IFMT(got.st_mode) == stat.S_IFMT(want.st_mode), rel
        if path.is_symlink():
            assert os.readlink(there) == os.readlink(path)
        elif path.is_file():
            assert (stat.S_IMODE(got.st_mode), got.st_mtime_ns, got.st_size) == \
                (stat.S_IMODE(want.st_mode) & 0o555, want.st_mtime_ns, want.st_size), rel
            assert there.read_bytes() == path.read_bytes(), rel


def _rows(db: Path) -> list:
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return con.execute("SELECT id, body FROM t ORDER BY id").fetchall()
    finally:
        con.close()


# --------------------------------------------------------------------------- what it shows


@pytest.fixture(params=["local", "s3"])
def history(request) -> dict:
    """``local_history`` and ``s3_history``, in turn."""
    return request.getfixturevalue(f"{request.param}_history")


def test_each_checkpoint_reads_as_restore_to_writes_it(history, mount):
    live, exports = history["live"], history["exports"]
    mounted = mount(live)

    for seq, export in exports.items():
        _same_as_export(mounted.point / "seq" / str(seq), export)
    latest = mounted.point / "latest"
    big = subprocess.run(["cat", latest / "codex" / "big.bin"], capture_output=True, check=True).stdout
    assert big == (exports[2] / "codex" / "big.bin").read_bytes()
    assert _rows(latest / DB) == _rows(exports[2] / DB) and len(_rows(mounted.point / "seq" / "1" / DB)) == 2000
    if shutil.which("sqlite3"):
        count = subprocess.run(["sqlite3", latest / DB, "SELECT count(*) FROM t"], capture_output=True, text=True)
        assert count.stdout.strip() == "2300", count.stderr
    with pytest.raises(OSError) as refused:
        open(latest / "codex" / "late.txt", "r+b")
    assert refused.value.errno == errno.EROFS
    code, err = mounted.stop()
    assert (code, err) == (0, "")
    assert list(mounted.tmp.iterdir()) == []                     # the rebuilt databases are gone with it


def test_latest_time_and_forks_link_to_their_checkpoints_and_new_ones_appear(bare_live, mount):
    from journal.browse.mount.layout import time_name

    live = bare_live
    live.write("codex-home/a.txt", "one\n")
    live.checkpoint()                                              # 1
    live.write("codex-home/b.txt", "two\n")
    live.checkpoint()                                              # 2
    mounted = mount(live, "--refresh", "0")
    point = mounted.point
    made = {seq: live.manifest(seq).created_ns for seq in (1, 2)}

    assert os.readlink(point / "latest") == "seq/2"
    assert sorted(os.listdir(point)) == ["forks", "latest", "seq", "time"]
    assert {name: os.readlink(point / "time" / name) for name in os.listdir(point / "time")} == \
        {time_name(made[1]): "../seq/1", time_name(made[2]): "../seq/2"}
    assert os.readlink(point / "time" / time_between(live, 1, 2)) == "../seq/1"
    assert (point / "time" / time_between(live, 1, 2) / "codex" / "a.txt").read_text() == "one\n"
    assert not os.path.lexists(point / "time" / "2000-01-01T00:00")   # before the oldest
    assert not os.path.lexists(point / "time" / "yesterday")
    assert not os.path.lexists(point / "seq" / "01")

    live.publish({}, fork=Fork(onto=2, why="test fork"), version=2)   # 3, off the main line
    live.write("codex-home/c.txt", "four\n")
    assert live.checkpoint().seq == 4

    assert os.listdir(point / "seq") == ["1", "2", "3", "4"]
    assert os.readlink(point / "latest") == "seq/4"
    assert os.listdir(point / "forks") == ["3"] and os.readlink(point / "forks" / "3") == "../seq/3"
    assert (point / "forks" / "3" / "codex" / "b.txt").read_text() == "two\n"
    assert len(os.listdir(point / "time")) == 3                     # main-line checkpoints only
    assert mounted.stop() == (0, "")


# --------------------------------------------------------------------------- damage


def test_a_damaged_blob_reads_eio_for_its_file_only(bare_live, mount):
    live = bare_live
    write(live.local / "codex-home" / "bad.txt", b"bad\n" * 1000)
    write(live.local / "codex-home" / "good.txt", b"good\n" * 1000)
    _database(live.local / "opencode-share" / "opencode.db", 500)
    live.checkpoint()
    entries = live.entries("codex")
    live.corrupt_blob(entries["bad.txt"].refs[0])
    live.corrupt_blob(live.entries("opencode")["opencode.db"].refs[0])   # the snapshot's page map
    mounted = mount(live)
    tree = mounted.point / "latest" / "codex"

    for _ in range(2):                                             # read twice: warned once
        with pytest.raises(OSError) as failed:
            (tree / "bad.txt").read_bytes()
        assert failed.value.errno == errno.EIO
    with pytest.raises(sqlite3.DatabaseError):
        _rows(mounted.point / "latest" / DB)
    assert (tree / "good.txt").read_bytes() == b"good\n" * 1000
    assert sorted(os.listdir(tree)) == ["bad.txt", "good.txt"] and (tree / "bad.txt").stat().st_size == 4000
    assert mounted.proc.poll() is None                             # still serving
    code, err = mounted.stop()
    assert code == 0
    warned = err.strip().splitlines()
    assert len(warned) == 2, err
    seq1 = mounted.point / "seq" / "1"                            # the kernel followed latest
    assert warned[0].startswith(f"warning: mount: {seq1}/codex/bad.txt: verify object: packs/"), err
    assert warned[0].endswith("it reads as an I/O error (EIO)")
    assert warned[1].startswith(f"warning: mount: {seq1}/{DB}: verify object: packs/"), err


def test_a_damaged_manifest_or_index_page_fails_only_what_it_names(bare_live, tmp_path):
    from journal.browse.mount.serve import build_fs

    live = bare_live
    live.write("codex-home/a.txt", "one\n")
    live.write("agent-state/claude/b.txt", "two\n")
    live.checkpoint()                                              # 1
    live.write("codex-home/a.txt", "three\n")
    live.checkpoint()                                              # 2
    live.corrupt_blob(live.manifest(1).trees["codex"].root)        # checkpoint 1's codex index
    manifest = live.store_path / manifest_key(2)
    manifest.write_bytes(manifest.read_bytes()[:-1] + b"!")        # checkpoint 2's manifest
    reporter = Collector()
    fs, _held = build_fs(Repository.open(live.store), str(tmp_path / "mnt"), str(tmp_path / "tmp"),
                         reporter=reporter)

    for _ in range(2):                                             # each failure warned once
        assert fs.readlink("/latest") == "seq/1"                   # passed over: the newest that reads
        for call, path in ((fs.getattr, "/seq/2"), (fs.readdir, "/seq/1/codex"), (fs.getattr, "/seq/1/codex/a.txt")):
            with pytest.raises(OSError) as failed:
                call(path, 0)
            assert failed.value.errno == errno.EIO, path
    assert [name for name, _mode, _ in fs.readdir("/seq", 0)[2:]] == ["1", "2"]
    assert [name for name, _mode, _ in fs.readdir("/seq/1/claude", 0)[2:]] == ["b.txt"]
    assert len(reporter.warnings) == 4, reporter.warnings
    assert reporter.warnings[0].startswith("mount: checkpoint 2 is unusable (its manifest: verify object: manifests/")
    assert reporter.warnings[1].startswith(f"mount: {tmp_path / 'mnt'}/seq/2: verify object: manifests/")


# --------------------------------------------------------------------------- unmounting


def _open_files(live: Live, mount) -> tuple[Mounted, int, sqlite3.Connection]:
    """A mount with a file open (10 bytes read) and a database open (queried)."""
    write(live.local / "codex-home" / "a.txt", b"a" * (4 << 20))
    _database(live.local / "opencode-share" / "opencode.db", 500)
    live.checkpoint()
    mounted = mount(live)
    fd = os.open(mounted.point / "latest" / "codex" / "a.txt", os.O_RDONLY)
    assert os.read(fd, 10) == b"a" * 10
    con = sqlite3.connect(mounted.point / "latest" / DB)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (500,)
    assert len(list(mounted.tmp.glob("journal-mount-*/*.db"))) == 1   # rebuilt once, privately
    assert stat.S_IMODE(next(mounted.tmp.glob("journal-mount-*")).stat().st_mode) == 0o700
    return mounted, fd, con


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_unmounts_at_once_with_files_open(bare_live, mount, sig):
    mounted, fd, con = _open_files(bare_live, mount)

    assert mounted.stop(sig) == (0, "")

    assert not os.path.ismount(mounted.point) and list(mounted.tmp.iterdir()) == []
    with pytest.raises(OSError) as gone:                           # an error, not a hang (past what the
        os.pread(fd, 10, 3 << 20)                                   # kernel read ahead and keeps)
    assert gone.value.errno == errno.ENOTCONN
    with contextlib.suppress(OSError):                             # the descriptor is freed all the same
        os.close(fd)
    con.close()


def test_fusermount_detaches_with_files_open_and_the_mount_ends_when_they_close(bare_live, mount):
    mounted, fd, con = _open_files(bare_live, mount)
    busy = subprocess.run(["fusermount", "-u", str(mounted.point)], capture_output=True, text=True)
    assert busy.returncode != 0 and os.path.ismount(mounted.point)   # in use: a plain unmount is refused

    subprocess.run(["fusermount", "-u", "-z", str(mounted.point)], check=True)

    assert not os.path.ismount(mounted.point)
    assert os.pread(fd, 10, 3 << 20) == b"a" * 10                  # what is open still reads
    assert con.execute("SELECT count(*) FROM t").fetchone() == (500,)
    assert mounted.proc.poll() is None
    os.close(fd)
    con.close()
    _, err = mounted.proc.communicate(timeout=60)                  # the last one closed: it ends
    assert (mounted.proc.returncode, err) == (0, "")
    assert list(mounted.tmp.iterdir()) == []


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name, says", [("missing", "no such directory; create it first"), ("full", "not empty"),
                                        ("file", "not a directory")])
def test_a_directory_that_cannot_be_mounted_on_is_one_line_exit_2(bare_live, tmp_path, name, says):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "file").write_text("x")

    proc = run_journal("mount", str(tmp_path / name), env=bare_live.env)

    assert proc.returncode == 2, proc.stderr
    assert one_line_error(proc).startswith(f"journal: error: mount {tmp_path / name}: {says}")
    assert (tmp_path / "full" / "x").read_text() == "x" and not (tmp_path / "store").exists()


# --------------------------------------------------------------------------- memory


CHECKPOINTS = 1000
TREES = 10          # distinct trees the checkpoints cycle through (each its own index pages)


def _many_checkpoints(live: Live) -> list[Manifest]:
    """``CHECKPOINTS`` manifests over ``TREES`` distinct trees of 8 files of 200 KiB and
    300 small ones (dozens of index pages each), written directly: the store's shape,
    without a thousand checkpoint runs."""
    home = live.local / "codex-home"
    for i in range(8):
        write(home / f"f{i}.bin", os.urandom(200 << 10))
    for d in range(10):
        for f in range(30):
            write(home / f"d{d}" / f"s{f:02d}.txt", f"{d}/{f}\n".encode())
    live.checkpoint()
    entries = sorted(live.entries("codex").values(), key=lambda e: e.path)
    files = [e for e in entries if e.kind != KIND_DIR]
    total = TreeRoot(root=None, files=len(files), bytes=sum(e.size for e in files))
    roots = [live.put_tree([msgspec.structs.replace(e, path=f"v{k}/{e.path}") for e in entries])
             for k in range(TREES)]
    repo = Repository.open(live.store)
    first, first_id = repo.load_manifest(1)
    made = [first]
    for seq in range(2, CHECKPOINTS + 1):
        manifest = msgspec.structs.replace(
            first, seq=seq, parent=seq - 1, parent_id=first_id, created=utc_now(), created_ns=first.created_ns + seq,
            trees={"codex": msgspec.structs.replace(total, root=roots[seq % TREES])})
        repo.put_manifest(encode_manifest(manifest)[1], seq)
        made.append(manifest)
    return made


def test_memory_stays_within_the_limits_over_a_thousand_checkpoints(bare_live, tmp_path):
    from journal.browse.mount.serve import Limits, build_fs

    live = bare_live
    _many_checkpoints(live)
    want = {i: (live.local / "codex-home" / f"f{i}.bin").read_bytes() for i in range(8)}
    store = CountingStore(open_store(str(live.store_path)))
    limits = Limits(cache_bytes=500 << 10, manifests=8, pages=16, listed=300, records=1 << 20)
    fs, held = build_fs(Repository.open(store), str(tmp_path / "mnt"), str(tmp_path / "tmp"), limits=limits)
    before = len(store.gets)

    assert len(fs.readdir("/seq", 0)) == CHECKPOINTS + 2
    assert len(store.gets) == before                               # listing seq/ reads no manifest
    for seq in range(2, CHECKPOINTS + 1):
        k, i = seq % TREES, seq % 8
        assert fs.getattr(f"/seq/{seq}/codex/v{k}/f{i}.bin")["st_size"] == 200 << 10
        fh = fs.open(f"/seq/{seq}/codex/v{k}/f{i}.bin", os.O_RDONLY)
        assert fs.read(None, 300 << 10, 0, fh) == want[i]
        fs.release(None, fh)
        if seq % 5 == 0:                                           # a directory deeper down, every fifth
            listed = fs.readdir(f"/seq/{seq}/codex/v{k}/d{seq // 5 % 10}", 0)
            assert [name for name, _mode, _ in listed[2:]] == [f"s{f:02d}.txt" for f in range(30)]
        assert len(held.manifests) <= 8 and len(held.pages) <= 16 and held.listings.weight <= 300
        assert held.blobs.weight <= 500 << 10 and held.records.bytes <= 1 << 20

    gets = [key for key, _start, _end in store.gets]
    assert sum(key.startswith("manifests/") for key in gets) >= CHECKPOINTS - 1   # every one was read ...
    assert sum(key.startswith("packs/") for key in gets) > 2 * limits.pages      # ... and pages dropped, read again
