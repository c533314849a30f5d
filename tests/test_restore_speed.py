"""Restore's fast write path, checked by counting and by real SIGKILLs, never by timing.

docs/design.md §11-12: a restore stages every file in full (verified) in the tree's
temp directory (``journal/local/tree_tmp.py``), makes a batch of them durable, and only then
renames them into place; each changed directory is fsynced once; the restore-complete marker is written
after all of that (``journal/restore/publish.py``, ``journal/restore/writer.py``). Fetching keeps a
bounded number of bytes in memory across every reader at once (``journal/repository/fetch.py``).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import LEFT_TMP, clean_env, container_env, describe as describe_tree, resident_pages
from tripwire import write_tripwire

from journal.local.tree_tmp import PREFIX as TMP_PREFIX
from journal.restore import publish as batch
from journal.repository import fetch
from journal.restore import writer as tree_writer
from journal.checkpoint.run import checkpoint
from journal.config import load_config
from journal.local.state import load_state
from journal.format.model import BlobRef
from journal.repository.repository import Repository
from journal.restore.run import restore
from journal.store import open_store

MiB = 1 << 20


# --- a live AM_LOCAL with an fx tree (files, dirs, a symlink) and a Hermes database -----

def make_env(tmp_path: Path) -> dict[str, str]:
    """A container's environment, whole (a child process gets only this)."""
    (tmp_path / "home").mkdir(exist_ok=True)
    return clean_env(container_env(tmp_path / "local", tmp_path / "store", tmp_path / "home",
                                   PYTHONDONTWRITEBYTECODE="1"))


def fill_local(local: Path, *, small: int = 60, big: tuple[int, ...] = (3, 5, 9), seed: int = 7) -> None:
    """Small files over a few directories, a few larger ones (several batches), a symlink,
    a read-only directory and a small SQLite database."""
    rng = random.Random(seed)
    fx = local / "fx-home"
    for i in range(small):
        d = fx / f"d{i % 5}" / f"e{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.jsonl").write_bytes(b"".join(b'{"i":%d,"t":"%s"}\n' % (i, rng.randbytes(30).hex().encode())
                                                 for _ in range(rng.randint(1, 200))))
    for n, mib in enumerate(big):
        (fx / "bulk").mkdir(exist_ok=True)
        (fx / "bulk" / f"blob-{n}.bin").write_bytes(rng.randbytes(mib * MiB))
    (fx / "empty.jsonl").write_bytes(b"")
    (fx / "mode.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(fx / "mode.sh", 0o751)
    os.symlink("d0/e0/f0.jsonl", fx / "latest")
    (fx / "ro").mkdir()
    (fx / "ro" / "keep.txt").write_bytes(b"read-only parent\n")
    os.chmod(fx / "ro", 0o555)
    (local / "hermes").mkdir(parents=True)
    con = sqlite3.connect(local / "hermes" / "state.db")
    con.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO messages (body) VALUES (?)", [(rng.randbytes(200).hex(),) for _ in range(2000)])
    con.commit()
    con.close()


def _db_rows(path: str) -> tuple:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*), sum(length(body)) FROM messages").fetchone()
    finally:
        con.close()


def describe(root: Path, leftovers: bool = False) -> dict[str, tuple]:
    """path -> (kind, mode, mtime_ns, sha256 | target); databases by their rows. The
    state directory is left out, and with ``leftovers`` a killed restore's temp directories."""
    return describe_tree(root, skip=(".journal", LEFT_TMP) if leftovers else (".journal",), db=_db_rows)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A store with one checkpoint of ``fill_local``, and what a restore must reproduce."""
    base = tmp_path_factory.mktemp("source")
    env = make_env(base)
    fill_local(Path(env["AM_LOCAL"]))
    checkpoint(load_config(env=env), open_store(env["JOURNAL_STORE"]))
    return env, describe(Path(env["AM_LOCAL"]))


def fresh_container(tmp_path: Path, source) -> dict[str, str]:
    """An empty AM_LOCAL and no local state, pointed at the source store."""
    env = {**source[0], **container_env(tmp_path / "local", source[0]["JOURNAL_STORE"], tmp_path / "home")}
    (tmp_path / "home").mkdir(parents=True, exist_ok=True)
    for tree in ("fx-home", "hermes"):  # presets are picked by which live paths exist
        (tmp_path / "local" / tree).mkdir(parents=True)
    return env


def marker(env) -> bool | None:
    """The restore-complete marker in ``env``'s local state; None when there is no state."""
    state_dir = Path(env["AM_LOCAL"]) / ".journal"
    if not (state_dir / "state.msgpack").exists():
        return None
    return load_state(str(state_dir), Repository.open(open_store(env["JOURNAL_STORE"])).store_id).restore_complete


# --- 1. ordering, counted ---------------------------------------------------------------

class Recorder:
    """Records os.fsync and os.replace, from every thread, with what they touched."""

    def __init__(self, monkeypatch):
        self.events: list[tuple] = []
        self._lock = threading.Lock()
        real_fsync, real_replace = os.fsync, os.replace

        def fsync(fd):
            st = os.fstat(fd)
            path = os.readlink(f"/proc/self/fd/{fd}")
            real_fsync(fd)
            self._add(("fsync", path, st.st_ino, stat.S_ISDIR(st.st_mode)))

        def replace(src, dst, **kw):
            st = os.lstat(src, dir_fd=kw.get("src_dir_fd"))
            if kw.get("src_dir_fd") is not None:  # a temp file, named in its directory
                src = os.path.join(os.readlink(f"/proc/self/fd/{kw['src_dir_fd']}"), src)
            if kw.get("dst_dir_fd") is not None:  # a live path, named in its directory
                dst = os.path.join(os.readlink(f"/proc/self/fd/{kw['dst_dir_fd']}"), dst)
            real_replace(src, dst)
            self._add(("replace", os.fspath(src), os.fspath(dst), st.st_ino, stat.S_ISLNK(st.st_mode)))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)

    def _add(self, event):
        with self._lock:
            self.events.append(event)


def test_every_file_is_durable_before_its_rename_and_each_directory_is_synced_once(tmp_path, source, monkeypatch):
    env = fresh_container(tmp_path, source)
    local = tmp_path / "local"
    rec = Recorder(monkeypatch)
    flushes = []
    real_flush = batch.PublishBatch.flush
    monkeypatch.setattr(batch.PublishBatch, "flush",
                        lambda self: (flushes.append(len(self.items)), real_flush(self))[1])

    result = restore(load_config(env=env), open_store(env["JOURNAL_STORE"]))

    assert result.complete
    assert describe(local) == source[1]
    events = rec.events
    # The trees' files (the state directory's own files come and go: their inodes are reused).
    synced_inodes = [e[2] for e in events if e[0] == "fsync" and not e[3] and "/.journal/" not in e[1]]
    renames = [(i, e) for i, e in enumerate(events) if e[0] == "replace" and e[2].startswith(str(local) + "/")
               and "/.journal/" not in e[2]]
    state_saves = [i for i, e in enumerate(events) if e[0] == "replace" and e[2].endswith("state.msgpack")]
    written = [p for p, d in source[1].items() if d[0] in ("file", "db", "symlink")]
    assert len(renames) == len(written), "every file, link and database reaches its live path by one rename"
    assert len(synced_inodes) == len(set(synced_inodes)), "no file is fsynced twice"
    for i, (_, src, dst, ino, is_link) in renames:
        assert os.path.basename(os.path.dirname(src)).startswith(TMP_PREFIX), f"{dst} was not staged in a temp dir"
        before = events[:i]
        if is_link:  # a symlink's target lives in its inode: the temp dir is synced before the rename
            assert any(e[0] == "fsync" and e[3] and e[1] == os.path.dirname(src) for e in before), dst
        else:
            assert any(e[0] == "fsync" and not e[3] and e[2] == ino for e in before), \
                f"{dst} was renamed into place before its bytes were fsynced"
    # Each directory that got a new entry is fsynced after its last new entry, and once
    # (the database install syncs its own directory too).
    dir_syncs = [(i, e[1]) for i, e in enumerate(events) if e[0] == "fsync" and e[3] and "/.journal" not in e[1]]
    for i, (_, _, dst, _, _) in renames:
        parent = os.path.dirname(dst)
        assert any(j > i and path == parent for j, path in dir_syncs), f"{parent} not fsynced after {dst}"
    counts: dict[str, int] = {}
    for _, path in dir_syncs:
        counts[path] = counts.get(path, 0) + 1
    assert all(n == 1 or (path == str(local / "hermes") and n == 2) for path, n in counts.items()), counts
    # The marker comes last: after every rename and every directory sync of the trees.
    assert len(state_saves) == 1 and state_saves[0] > max(i for i, _ in renames) and \
        state_saves[0] > max(i for i, _ in dir_syncs)
    assert marker(env) is True
    # Batches: files are synced in groups, not one by one.
    assert sum(flushes) == len(renames) and len(flushes) < len(renames) / 4


# --- 2. real SIGKILLs at exact calls ------------------------------------------------------



def journal_cmd(script: Path) -> list[str]:
    return [sys.executable, str(script)]


def run_restore(env, script: Path, kill: str) -> subprocess.CompletedProcess:
    return subprocess.run(journal_cmd(script) + ["restore"], env={**env, "JOURNAL_TEST_KILL": kill},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("fn", ["fsync", "replace"])
def test_restore_sigkilled_at_any_sync_or_rename_exposes_only_whole_durable_files(tmp_path, source, fn):
    script = write_tripwire(tmp_path)
    counting = fresh_container(tmp_path / "count", source)
    done = run_restore(counting, script, f"{fn}:0")
    assert done.returncode == 0, done.stderr
    total = int(done.stderr.rsplit("calls=", 1)[1].split()[0])
    assert total > 10
    # The first call, one in the middle, and the last one before the state is saved
    # (the state's own write is the last fsync and the last rename).
    expected = source[1]
    for n in sorted({1, total // 2, total - 1}):
        env = fresh_container(tmp_path / f"kill-{n}", source)
        local = Path(env["AM_LOCAL"])
        proc = run_restore(env, script, f"{fn}:{n}")
        assert proc.returncode == -signal.SIGKILL, f"not killed at {fn} #{n}: {proc.stderr}"

        partial = describe(local, leftovers=True)
        for path, item in partial.items():
            if item[0] == "dir":  # directory modes are applied last: compare kinds only
                assert expected[path][0] == "dir", path
            else:
                assert item == expected[path], f"killed at {fn} #{n}: {path} is at its live path but not whole"
        strays = [p for tree in ("fx-home", "hermes") for p in (local / tree).rglob("*.part")
                  if not p.parent.name.startswith(TMP_PREFIX)]
        assert strays == [], "temp files never leave the trees' temp directories"
        assert not marker(env), f"killed at {fn} #{n}: the marker says complete"
        refused = subprocess.run(journal_cmd(script) + ["checkpoint"], env={**env, "JOURNAL_TEST_KILL": "fsync:0"},
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1 and "restore" in refused.stderr, "no checkpoint over a partial restore"

        again = run_restore(env, script, "fsync:0")
        assert again.returncode == 0, again.stderr
        assert describe(local) == expected
        assert marker(env) is True


# --- 3. bounded memory and bounded work in flight -----------------------------------------

class SlowReader:
    """A BlobReader that makes payloads of the refs' sizes and counts what is outstanding."""

    read_ahead = True

    def __init__(self, budget: fetch.Budget):
        self.budget = budget
        self.peak = 0
        self.lock = threading.Lock()

    def read_run(self, refs):
        with self.lock:
            self.peak = max(self.peak, self.budget.used)
        return [bytes(r.size) for r in refs]


def refs_of(pack: str, sizes: list[int], stored: int = 1000) -> list[BlobRef]:
    refs, offset = [], 0
    for n, size in enumerate(sizes):
        refs.append(BlobRef(f"{n:064x}", pack, offset, stored, size))
        offset += stored
    return refs


def test_runs_are_cut_by_payload_bytes_as_well_as_stored_bytes():
    # 1,000 well-compressed 1 MiB chunks would be one 1 MB read expanding to 1,000 MiB.
    refs = refs_of("p" * 64, [MiB] * 1000, stored=1000)
    runs = list(fetch.runs(refs))
    assert all(sum(r.size for r in run) <= fetch.RUN_BYTES for run in runs)
    assert [r for run in runs for r in run] == refs
    assert len(runs) == 1000 * MiB // fetch.RUN_BYTES


def test_fetched_bytes_in_memory_stay_within_the_budget_across_readers():
    budget = fetch.Budget(10 * MiB)
    reader = SlowReader(budget)
    streams = [fetch.fetch_in_order(refs_of(f"{k}" * 64, [MiB] * 64), reader, budget=budget) for k in range(3)]
    got = [0, 0, 0]
    while any(g < 64 for g in got):  # one consumer interleaving three streams
        for k, stream in enumerate(streams):
            if got[k] < 64:
                assert len(next(stream)) == MiB
                got[k] += 1
    biggest_run = max(fetch.run_cost(run) for run in fetch.runs(refs_of("x" * 64, [MiB] * 64)))
    assert reader.peak <= budget.limit + 3 * biggest_run
    assert all(next(stream, None) is None for stream in streams)
    assert budget.used == 0


def test_one_thread_reading_two_streams_in_turn_never_blocks_on_the_budget():
    # The database rebuild reads the full map's pages and the delta's pages in turn, in
    # one thread: a budget that made one stream wait for the other would hang here.
    budget = fetch.Budget(1)
    reader = SlowReader(budget)
    a = fetch.fetch_in_order(refs_of("a" * 64, [4096] * 5000, stored=2000), reader, budget=budget)
    b = fetch.fetch_in_order(refs_of("b" * 64, [4096] * 5000, stored=2000), reader, budget=budget)
    for _ in range(5000):
        next(a)
        next(b)
    a.close()
    b.close()
    assert budget.used == 0


def test_a_store_on_local_disk_is_read_in_the_callers_thread(monkeypatch):
    """``read_ahead`` False (a local disk): every run is read inline, in order, within
    the budget; no fetch thread is started."""
    def no_threads():
        raise AssertionError("a fetch thread was started for a local-disk store")

    monkeypatch.setattr(fetch, "_executor", no_threads)
    budget = fetch.Budget(1)
    reader = SlowReader(budget)
    reader.read_ahead = False
    refs = refs_of("d" * 64, [MiB] * 40)
    assert [len(p) for p in fetch.fetch_in_order(refs, reader, budget=budget)] == [MiB] * 40
    assert reader.peak <= max(fetch.run_cost(run) for run in fetch.runs(refs)) and budget.used == 0


def test_an_abandoned_stream_gives_its_budget_back():
    budget = fetch.Budget(64 * MiB)
    stream = fetch.fetch_in_order(refs_of("c" * 64, [MiB] * 40), SlowReader(budget), budget=budget)
    next(stream)
    assert budget.used > 0
    stream.close()
    assert budget.used == 0


def test_files_in_flight_are_bounded_by_the_pipeline_and_the_batch(tmp_path, monkeypatch):
    env = make_env(tmp_path)
    fill_local(Path(env["AM_LOCAL"]), small=400, big=())
    store = open_store(env["JOURNAL_STORE"])
    checkpoint(load_config(env=env), store)
    env["AM_LOCAL"] = str(tmp_path / "again")
    for tree in ("fx-home", "hermes"):
        (tmp_path / "again" / tree).mkdir(parents=True)
    peak = [0]
    real_add = batch.PublishBatch.add

    def add(self, staged):
        open_fds = len(os.listdir("/proc/self/fd"))
        peak[0] = max(peak[0], open_fds)
        real_add(self, staged)

    monkeypatch.setattr(batch.PublishBatch, "add", add)
    before = len(os.listdir("/proc/self/fd"))
    assert restore(load_config(env=env), store).complete
    assert peak[0] - before <= batch.BATCH_FILES + tree_writer.IN_FLIGHT * tree_writer.GROUP_FILES + 16


PEAK_SCRIPT = r'''
import os, sys
from journal.config import load_config
from journal.restore.run import restore
from journal.store import open_store
env = dict(os.environ)
result = restore(load_config(env=env), open_store(env["JOURNAL_STORE"]), to=sys.argv[1])
assert result.complete
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print(hwm)
'''


def test_restoring_a_file_larger_than_the_memory_bound_streams_it(tmp_path):
    """A 160 MiB incompressible file restores with a peak RSS well under its size."""
    env = make_env(tmp_path)
    fx = Path(env["AM_LOCAL"]) / "fx-home"
    fx.mkdir(parents=True)
    rng = random.Random(3)
    with open(fx / "weights.bin", "wb") as fh:
        for _ in range(160):
            fh.write(rng.randbytes(MiB))
    checkpoint(load_config(env=env), open_store(env["JOURNAL_STORE"]))
    (tmp_path / "peak.py").write_text(PEAK_SCRIPT)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(tmp_path / "peak.py"), str(out)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    peak_mib = int(proc.stdout.split()[-1]) / 1024
    assert (out / "fx" / "weights.bin").stat().st_size == 160 * MiB
    assert peak_mib < 100, f"peak RSS {peak_mib:.0f} MiB"


def test_jobs_put_databases_and_large_files_first_and_group_small_files_per_tree():
    from journal.format.model import Entry

    def entry(path, size, kind="file"):
        return Entry(path=path, kind=kind, mode=0o644, size=size)

    a, b = object(), object()
    writes = [(a, entry("a/db", 5 * MiB, "sqlite")), (a, entry("a/big1", 1 * MiB)), (a, entry("a/big2", 9 * MiB))]
    writes += [(a, entry(f"a/s{i:02d}", 1000)) for i in range(40)]
    writes += [(b, entry("b/dir", 0, "dir")), (b, entry("b/link", 0, "symlink"))]
    writes += [(b, entry(f"b/m{i}", 200 << 10)) for i in range(8)]
    jobs = tree_writer.plan_jobs(writes)

    assert [e.path for _, es in jobs[:3] for e in es] == ["a/db", "a/big2", "a/big1"]
    assert sorted((id(t), e.path) for t, es in jobs for e in es) == sorted((id(t), e.path) for t, e in writes)
    for tree, entries in jobs[3:]:
        assert all((tree, e) in [(t, x) for t, x in writes] for e in entries), "a group never mixes trees"
        assert len(entries) <= tree_writer.GROUP_FILES
        assert len(entries) == 1 or sum(e.size for e in entries) <= tree_writer.GROUP_BYTES
    # a's 40 tiny files: 16 + 16 + 8; b's: the dir, the link and five 200 KiB files, then three more.
    assert [len(es) for _, es in jobs[3:]] == [16, 16, 8, 7, 3]


def test_a_failed_sync_publishes_nothing_of_its_batch_and_leaves_no_temp_files(tmp_path, source, monkeypatch):
    """An I/O error while making a batch durable: the restore fails, no file of that batch
    reaches its live path, every staged temp file is removed, and no marker is written."""
    import errno

    env = fresh_container(tmp_path, source)
    real_fsync, calls = os.fsync, []

    def failing_fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith(".part"):
            calls.append(path)
            if len(calls) == 3:
                raise OSError(errno.EIO, "simulated I/O error", path)
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    restore_fails_leaving_no_part_of_the_batch(env, source, monkeypatch)


def restore_fails_leaving_no_part_of_the_batch(env, source, monkeypatch) -> None:
    """A restore whose batch's sync fails (as ``monkeypatch`` arranged): it raises, no
    file of that batch is at its live path, no temp file is left, no marker is written;
    a restore after it (``monkeypatch`` undone) completes."""
    local = Path(env["AM_LOCAL"])
    with pytest.raises(OSError, match="simulated"):
        restore(load_config(env=env), open_store(env["JOURNAL_STORE"]))
    monkeypatch.undo()

    partial = describe(local)
    assert partial != source[1], "the failed batch was not published"
    for path, item in partial.items():
        if item[0] != "dir":
            assert item == source[1][path], f"{path} is at its live path but not whole"
    assert not any(local.rglob(LEFT_TMP)), "the temp directories are cleaned up"
    assert marker(env) is None, "no state, so no marker"
    assert restore(load_config(env=env), open_store(env["JOURNAL_STORE"])).complete
    assert describe(local) == source[1]


def test_a_damaged_small_file_read_with_its_group_loses_only_itself(tmp_path):
    """Small files are read together with one ranged read; a bad blob among them fails
    that read, and then each file reads its own blobs: the siblings are restored whole,
    the damaged one is reported lost, and the restore is incomplete."""
    from journal.repository.history import ManifestCache
    from journal.format.objects import HEADER
    from journal.repository.repository import pack_key

    env = make_env(tmp_path)
    fx = Path(env["AM_LOCAL"]) / "fx-home"
    fx.mkdir(parents=True)
    for i in range(12):
        (fx / f"note-{i:02d}.jsonl").write_bytes(b'{"n":%d}\n' % i * (50 + i))
    store = open_store(env["JOURNAL_STORE"])
    checkpoint(load_config(env=env), store)
    repo = Repository.open(store)
    seq = repo.manifest_seqs()[-1]
    entries = {e.path: e for e in ManifestCache(repo).tree(seq, "fx")[0]}
    refs = sorted((entries[f"note-{i:02d}.jsonl"].refs[0] for i in range(12)), key=lambda r: r.offset)
    assert all(b.offset == a.offset + a.length for a, b in zip(refs, refs[1:])), "one run, read together"
    bad = entries["note-05.jsonl"].refs[0]
    pack = Path(env["JOURNAL_STORE"]) / pack_key(bad.pack)
    data = bytearray(pack.read_bytes())
    data[bad.offset + HEADER.size + (bad.length - HEADER.size) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))

    out = tmp_path / "out"
    result = restore(load_config(env=env), store, to=str(out))

    fx_result = [t for t in result.trees if t.name == "fx"][0]
    assert not result.complete and fx_result.lost == ["note-05.jsonl"]
    assert not (out / "fx" / "note-05.jsonl").exists()
    for i in (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11):
        assert (out / "fx" / f"note-{i:02d}.jsonl").read_bytes() == (fx / f"note-{i:02d}.jsonl").read_bytes()


def test_small_files_are_read_with_one_ranged_read_per_group(tmp_path, monkeypatch):
    env = make_env(tmp_path)
    fx = Path(env["AM_LOCAL"]) / "fx-home"
    fx.mkdir(parents=True)
    for i in range(40):
        (fx / f"s{i:02d}.jsonl").write_bytes(b'{"s":%d}\n' % i * 30)
    store = open_store(env["JOURNAL_STORE"])
    checkpoint(load_config(env=env), store)
    reads = []
    real = fetch.RawReader.read_run
    monkeypatch.setattr(fetch.RawReader, "read_run", lambda self, refs: (reads.append(len(refs)), real(self, refs))[1])

    assert restore(load_config(env=env), store, to=str(tmp_path / "out")).complete

    groups = -(-40 // tree_writer.GROUP_FILES)
    assert sorted(reads) == sorted([16, 16, 8]) and len(reads) == groups, reads
    assert all((tmp_path / "out" / "fx" / f"s{i:02d}.jsonl").read_bytes() == b'{"s":%d}\n' % i * 30 for i in range(40))


def test_stopping_the_pool_joins_a_staging_thread_that_has_not_begun_running():
    """A Ctrl-C right after ``Thread.start`` created a staging thread leaves it
    registered but not yet running; ``join`` refuses such a thread ("cannot join
    thread before it is started"), which once surfaced as a traceback on Ctrl-C. It
    is joined once it runs, so nothing it writes lands after the cleanup."""
    from journal.restore.writer import _join_started

    done = []
    thread = threading.Thread(target=lambda: (time.sleep(0.05), done.append(1)), name="journal-restore_9")
    starter = threading.Timer(0.05, thread.start)
    starter.start()
    _join_started(thread, time.monotonic() + 10)   # called before the thread starts
    assert done == [1] and not thread.is_alive()
    starter.join()


def test_the_filesystem_type_is_found_for_a_mount_point_with_a_space(tmp_path):
    """``/proc/self/mountinfo`` escapes a space in a mount point (``\\040``): a store under
    such a mount is still recognised as local disk (tmpfs here), so it is read inline."""
    import subprocess

    from journal.store.local import LocalStore, mount_type

    point = tmp_path / "a mount point"
    point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "journal-test", str(point)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    try:
        assert mount_type(str(point / "store")) == "tmpfs"
        assert LocalStore(str(point / "store")).read_ahead is False
    finally:
        subprocess.run(["umount", str(point)], capture_output=True)


def test_a_large_restored_file_leaves_the_page_cache_as_it_is_written(tmp_path, disk_dir):
    """A 48 MiB file restores holding at most about two writeback steps of page cache,
    not all of its pages (each write then reuses pages just freed: ``atomic.drop_written``);
    a small file stays cached."""
    env = make_env(tmp_path)
    fx = Path(env["AM_LOCAL"]) / "fx-home"
    fx.mkdir(parents=True)
    (fx / "weights.bin").write_bytes(random.Random(5).randbytes(48 * MiB))
    (fx / "notes.txt").write_bytes(b"kept cached\n" * 1000)
    checkpoint(load_config(env=env), open_store(env["JOURNAL_STORE"]))
    out = disk_dir / "out"
    restore(load_config(env=env), open_store(env["JOURNAL_STORE"]), to=str(out))
    step_pages = 8 * MiB // os.sysconf("SC_PAGE_SIZE")
    assert resident_pages(out / "fx" / "weights.bin") <= 2 * step_pages + step_pages // 2
    assert resident_pages(out / "fx" / "notes.txt") > 0
    assert (out / "fx" / "weights.bin").read_bytes() == (fx / "weights.bin").read_bytes()


# --- 4. one syncfs a batch, where it makes the batch durable -------------------------------

@pytest.fixture
def whole_sync(monkeypatch):
    """Restore as on ext4 or XFS, where one ``syncfs`` makes a batch durable and reports
    a failure (``atomic.syncs_whole``): forced here, on tmpfs, where the call is real
    too. Batches of 16 files, so the source's files take several."""
    monkeypatch.setattr(batch, "syncs_whole", lambda path: True)
    monkeypatch.setattr(batch, "WHOLE_BATCH_FILES", 16)


def test_with_one_syncfs_a_batch_every_file_is_written_before_it_and_renamed_after(tmp_path, source, monkeypatch,
                                                                                   whole_sync):
    env = fresh_container(tmp_path, source)
    local = tmp_path / "local"
    rec = Recorder(monkeypatch)
    real_sync, real_utime = batch.sync_filesystem, os.utime

    def sync(fd):
        real_sync(fd)
        rec._add(("syncfs",))

    def utime(path, *args, **kwargs):   # a staged file's last write: its times, through its descriptor
        real_utime(path, *args, **kwargs)
        if isinstance(path, int):
            rec._add(("written", os.fstat(path).st_ino))

    monkeypatch.setattr(batch, "sync_filesystem", sync)
    monkeypatch.setattr(os, "utime", utime)
    result = restore(load_config(env=env), open_store(env["JOURNAL_STORE"]))

    assert result.complete
    assert describe(local) == source[1]
    events = rec.events
    syncs = [i for i, e in enumerate(events) if e[0] == "syncfs"]
    written = {e[1]: i for i, e in enumerate(events) if e[0] == "written"}
    files = {str(local / p) for p, d in source[1].items() if d[0] == "file"}   # a database is staged durable
    renames = [(i, e) for i, e in enumerate(events) if e[0] == "replace" and e[2] in files]
    assert len(renames) == len(files)
    for i, (_, _, dst, ino, _) in renames:
        assert any(written[ino] < s < i for s in syncs), f"{dst} was renamed before a syncfs made it durable"
    assert not [e for e in events if e[0] == "fsync" and not e[3] and e[2] in {r[3] for _, r in renames}], \
        "no file is fsynced"
    tree_dir_syncs = [e for e in events if e[0] == "fsync" and e[3] and "/.journal" not in e[1]
                      and e[1] != str(local / "hermes")]   # a database's install syncs its own directory
    assert tree_dir_syncs == [], "the directories are made durable by the last syncfs"
    assert max(syncs) > max(i for i, _ in renames)
    state_saves = [i for i, e in enumerate(events) if e[0] == "replace" and e[2].endswith("state.msgpack")]
    assert len(state_saves) == 1 and state_saves[0] > max(syncs), "the marker comes after every syncfs"
    assert len(files) // 16 <= len(syncs) <= len(files) // 16 + 4, "one syncfs a batch, one for the directories"


def test_a_failed_syncfs_publishes_nothing_of_its_batch_and_leaves_no_temp_files(tmp_path, source, monkeypatch,
                                                                                  whole_sync):
    """A write-back failure reported by a batch's ``syncfs``: as a failed fsync, the
    restore fails, no file of that batch reaches its live path, the staged files are
    removed, and no marker is written."""
    import errno

    env = fresh_container(tmp_path, source)
    real, calls = batch.sync_filesystem, []

    def failing(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.EIO, "simulated write-back failure")
        real(fd)

    monkeypatch.setattr(batch, "sync_filesystem", failing)
    restore_fails_leaving_no_part_of_the_batch(env, source, monkeypatch)


def test_syncfs_stands_for_fsyncs_only_where_it_makes_writes_durable_and_reports_failures(tmp_path, monkeypatch):
    """ext4, XFS and btrfs from Linux 5.8 (where ``syncfs`` reports a write-back failure);
    never tmpfs, an overlay, FUSE or NFS, an older kernel, nor a path whose device no
    mount names."""
    from journal import atomic, localfs

    dev = os.stat(tmp_path).st_dev
    for fstype, release, mount_dev, whole in (("ext4", "6.1.0", dev, True), ("xfs", "5.8.0-generic", dev, True),
                                              ("btrfs", "5.10.2", dev, True), ("ext4", "5.7.19", dev, False),
                                              ("tmpfs", "6.1.0", dev, False), ("overlay", "6.1.0", dev, False),
                                              ("fuse.hf-mount", "6.1.0", dev, False), ("nfs4", "6.1.0", dev, False),
                                              ("ext4", "6.1.0", dev + 1, False)):
        monkeypatch.setattr(localfs, "mounts", lambda: [localfs.Mount("/", mount_dev, fstype)])
        monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Linux", "h", release, "#1", "x86_64")))
        assert atomic.syncs_whole(str(tmp_path)) is whole, (fstype, release, mount_dev)
