"""Adversarial review of format 5 SQLite snapshots (page groups, v3 maps, rebuild).

Real SQLite databases, the real ``journal`` CLI in subprocesses (restore, verify, gc)
and the library for fast checkpoints; no mocks. The oracle for a restored checkpoint
is a copy of the live database taken with SQLite's backup API right after that
checkpoint and switched to rollback-journal mode, exactly as journal stages it: a
restore must give the same bytes, pass ``PRAGMA integrity_check`` and dump the same
schema and rows.

Passing: churn over ~27 checkpoints (inserts, updates, deletes, VACUUM, incremental
auto-vacuum, page-size changes, growth and shrink; full, cumulative and recent maps
all used) restores byte-exact; a writer committing during checkpoints (WAL and
rollback-journal mode) always restores to an exact committed state; a damaged group
delta, member list or full-map group falls back or is reported lost, never rebuilt
wrong, and ``verify --full`` reports it; gc ``--keep-last 1`` (twice) then restore,
more checkpoints, and a fresh container; a replaced, truncated or emptied database; a
group delta reused after the file shrank below one of its members; 256-member and
2-member group deltas; a one-page database and a 0-byte file.

Three bugs this review found, each with its test here:

1. A snapshot whose pages were all stored again (its full map's record could not be
   read) was reported lost when that record rotted: rebuild read every record of the
   full map. Now a damaged full-map record makes the rebuild write only the pages the
   snapshot reads (``sqlite/rebuild.py``); ``verify --full`` still reports the damage.
2. A previous snapshot whose page maps had rotted stopped every later checkpoint, of
   every tree. Now that database is captured as a new full snapshot, with a warning
   (``checkpoint/scan.py``).
3. A map's pack table takes at most 65,535 packs (0xFFFF is the map's own), and a full
   map of a database that keeps changing names one more at each full map. Now the
   writer keeps a map under ``MAP_PACKS`` by storing the least-used packs' pages again
   (``sqlite/capture.py``), and ``encode_map`` refuses a 65,536th pack.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import OpencodeLive, wait_for
from journal.format.objects import FLAG_DELTA, FLAG_MEMBERS, HEADER, embedded_members, parse_header
from journal.repository.repository import pack_key
from journal.format.pagemap import decode_map

TREE, DB = OpencodeLive.TREE, OpencodeLive.DB


# --------------------------------------------------------------------------- helpers


class Churned(OpencodeLive):
    """A container (HOME ``root/name``) with an opencode database, on the store
    ``root/store`` unless given, and the oracle: ``expected[seq]``, the database as it was
    at each checkpoint. ``run`` expects exit 0 unless told."""

    def __init__(self, root: Path, store: Path | None = None, name: str = "a"):
        super().__init__(root / name, store or root / "store", expect=0)
        self.root = root
        self.expected: dict[int, Path] = {}
        (root / "expected").mkdir(exist_ok=True)

    def gc_then_restore(self, seq: int, out: Path, what: str) -> None:
        """gc down to the newest checkpoint (mark, then sweep), then checkpoint ``seq``
        restores to its expected database and the store audits clean."""
        for _ in range(2):
            self.run("gc", "--keep-last", "1", "--grace", "0s")
        _, got = self.restore_at(seq, out)
        assert_same_db(got, self.expected[seq], what)
        assert "0 errors" in self.run("verify", "--full").stdout

    def restore_at(self, seq: int, dest: Path, ok: bool = True) -> tuple[subprocess.CompletedProcess, Path]:
        proc = self.run("restore", "--at", str(seq), "--to", str(dest), expect=0 if ok else None)
        return proc, dest / TREE / DB

    # -- the oracle
    def save_expected(self, seq: int, con: sqlite3.Connection | None = None) -> Path:
        """The database as SQLite sees it now, copied the way journal stages it."""
        path = self.root / "expected" / f"{self.home.name}-{seq}.db"
        if path.exists():
            path.unlink()
        src = con or sqlite3.connect(self.db)
        dst = sqlite3.connect(path, isolation_level=None)
        try:
            src.backup(dst)
            assert dst.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
        finally:
            dst.close()
            if con is None:
                src.close()
        self.expected[seq] = path
        return path


def integrity(path: Path) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return "; ".join(r[0] for r in con.execute("PRAGMA integrity_check").fetchall())
    finally:
        con.close()


def dump(path: Path) -> list[str]:
    """Every schema row and every table row, in a stable order."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(con.iterdump())
    finally:
        con.close()


def assert_same_db(got: Path, want: Path, what: str) -> None:
    assert got.is_file(), f"{what}: no database restored at {got}"
    assert integrity(got) == "ok", what
    assert dump(got) == dump(want), f"{what}: restored rows differ"
    assert got.read_bytes() == want.read_bytes(), f"{what}: restored bytes differ from the staged copy"


def corrupt(store_dir: Path, pack: str, offset: int) -> None:
    path = store_dir / pack_key(pack)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def group_records(box: Churned, seq: int):
    """Every record the snapshot at ``seq`` names, with its raw bytes: (ref, flags, members)."""
    snap = box.db_snapshot(seq)
    seen = {}
    for loc in list(snap.pages) + list(snap.base.values()):
        rec = loc.rec
        if (rec.pack, rec.offset) in seen:
            continue
        raw = (box.store_path / pack_key(rec.pack)).read_bytes()[rec.offset:rec.offset + rec.length]
        flags = parse_header(raw, key="t").flags
        seen[(rec.pack, rec.offset)] = (rec, flags, embedded_members(raw, key="t"))
    return list(seen.values())


def new_db(path: Path, *, page_size: int = 4096, wal: bool = True, auto_vacuum: str | None = None) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None)
    if auto_vacuum:
        con.execute(f"PRAGMA auto_vacuum={auto_vacuum}")
    con.execute(f"PRAGMA page_size={page_size}")
    if wal:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v BLOB)")
    con.execute("CREATE INDEX t_k ON t(k)")
    return con


def insert(con: sqlite3.Connection, rng: random.Random, n: int, big: bool = False) -> None:
    top = con.execute("SELECT coalesce(max(id), 0) FROM t").fetchone()[0]
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)",
                    [(top + i + 1, f"{rng.getrandbits(64):016x}",
                      rng.randbytes(rng.choice((10, 300, 2000, 9000)) if big else rng.randrange(5, 300)))
                     for i in range(n)])
    con.execute("COMMIT")


# --------------------------------------------------------------------------- 1. churn


@pytest.mark.long(short=4, full=1)
@pytest.mark.parametrize("seed,page_size,wal,auto_vacuum", [(11, 1024, True, None), (12, 512, False, "INCREMENTAL")])
def test_every_checkpoint_of_a_churning_database_restores_byte_exact(tmp_path, seed, page_size, wal, auto_vacuum,
                                                                      long_size):
    """Random inserts, updates, deletes, VACUUM, incremental vacuum, page-size changes,
    growth then shrink: every checkpoint restored with the CLI equals the database as
    it was then, byte for byte; and the snapshots did use every map shape. (A plain run
    restores every 4th checkpoint and the newest: ``long_size`` is the stride.)"""
    box = Churned(tmp_path)
    rng = random.Random(seed)
    con = new_db(box.db, page_size=page_size, wal=wal, auto_vacuum=auto_vacuum)
    insert(con, rng, 1500)
    box.save_expected(box.tick(), con)
    for tick in range(26):
        op = ("insert", "update", "delete", "vacuum", "big", "shrink", "pagesize", "mixed")[tick % 8] \
            if tick < 16 else rng.choice(("insert", "update", "delete", "vacuum", "big", "shrink", "mixed"))
        if op == "insert":
            insert(con, rng, rng.randrange(1, 40))
        elif op == "big":
            insert(con, rng, rng.randrange(50, 300), big=True)
        elif op == "update":
            top = con.execute("SELECT max(id) FROM t").fetchone()[0]
            con.execute("BEGIN")
            for _ in range(rng.randrange(1, 60)):
                con.execute("UPDATE t SET v = ? WHERE id = ?", (rng.randbytes(rng.randrange(5, 300)), rng.randrange(1, top + 1)))
            con.execute("COMMIT")
        elif op == "delete":
            con.execute("DELETE FROM t WHERE id % ? = 0", (rng.randrange(3, 11),))
        elif op == "vacuum":
            if wal:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.execute("VACUUM")
        elif op == "shrink":
            top = con.execute("SELECT max(id) FROM t").fetchone()[0]
            con.execute("DELETE FROM t WHERE id > ?", (rng.randrange(top // 3, top),))
            con.executescript("PRAGMA incremental_vacuum")
            if wal:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if rng.random() < 0.5:
                con.execute("VACUUM")
        elif op == "pagesize":
            if wal:
                con.execute("PRAGMA journal_mode=DELETE")
            con.execute(f"PRAGMA page_size={rng.choice((2048, 8192, 65536, page_size))}")
            con.execute("VACUUM")
            if wal:
                con.execute("PRAGMA journal_mode=WAL")
        elif op == "mixed":
            insert(con, rng, 5)
            con.execute("DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT 25)")
        seq = box.tick()
        if seq is None:  # nothing changed: the newest checkpoint must still be the database
            newest = max(box.expected)
            assert dump(box.expected[newest]) == list(con.iterdump())
        else:
            box.save_expected(seq, con)
    con.close()
    shapes = {len(box.entry(seq).refs) for seq in box.expected}
    assert shapes == {1, 2, 3}, f"full, cumulative and recent maps all exercised: {shapes}"
    assert any(box.db_snapshot(seq).deltas for seq in box.expected), "group deltas exercised"
    seqs = sorted(box.expected)
    for seq in sorted({*seqs[::long_size], seqs[-1]}):
        _, got = box.restore_at(seq, tmp_path / f"out-{seq}")
        assert_same_db(got, box.expected[seq], f"checkpoint {seq}")
    proc = box.run("verify", "--full")
    assert "0 errors" in proc.stdout


# --------------------------------------------------------------------------- 2. a writer during checkpoints

WRITER = r"""
import os, sqlite3, sys
db, mode, stop, log = sys.argv[1:5]
con = sqlite3.connect(db, isolation_level=None, timeout=30)
con.execute("PRAGMA journal_mode=" + mode)
con.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, k TEXT, v BLOB)")
con.execute("CREATE TABLE IF NOT EXISTS meta(one INTEGER PRIMARY KEY, n INTEGER)")
con.execute("INSERT OR IGNORE INTO meta VALUES (1, 0)")
n = con.execute("SELECT n FROM meta").fetchone()[0]
while not os.path.exists(stop):
    n += 1
    con.execute("BEGIN IMMEDIATE")
    # state after commit n is a function of n alone (see expected_rows)
    con.execute("INSERT INTO t VALUES (?, ?, ?)", (n, format(n * 2654435761 % 2**32, "08x"), bytes([n % 251]) * (50 + n * 37 % 900)))
    if n % 3 == 0:
        con.execute("UPDATE t SET v = ? WHERE id = ?", (bytes([n % 7]) * (20 + n % 400), n // 2))
    if n % 5 == 0:
        con.execute("DELETE FROM t WHERE id = ?", (n - 40,))
    con.execute("UPDATE meta SET n = ?", (n,))
    con.execute("COMMIT")
    if n % 150 == 0:
        con.execute("VACUUM")
    with open(log, "w") as fh:
        fh.write(str(n))
con.close()
"""


def expected_rows(n: int) -> list[tuple]:
    rows: dict[int, tuple] = {}
    for i in range(1, n + 1):
        rows[i] = (i, format(i * 2654435761 % 2**32, "08x"), bytes([i % 251]) * (50 + i * 37 % 900))
        if i % 3 == 0 and i // 2 in rows:
            r = rows[i // 2]
            rows[i // 2] = (r[0], r[1], bytes([i % 7]) * (20 + i % 400))
        if i % 5 == 0:
            rows.pop(i - 40, None)
    return [rows[k] for k in sorted(rows)]


@pytest.mark.parametrize("mode", ["WAL", "DELETE"])
def test_a_writer_committing_during_checkpoints_restores_to_a_committed_state(tmp_path, mode):
    box = Churned(tmp_path)
    stop, log = tmp_path / "stop", tmp_path / "n"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(box.db), mode, str(stop), str(log)])
    seqs: list[int] = []
    failures: list[str] = []

    def commits() -> int:
        return int(log.read_text() or 0) if log.exists() else 0   # (empty while the writer rewrites it)

    try:
        wait_for(commits, 60, "the writer's first commit")
        for _ in range(8):
            proc = box.run("checkpoint", "--json", expect=None)
            if proc.returncode == 0:
                seq = json.loads(proc.stdout)["seq"]
                if seq is not None:
                    seqs.append(seq)
            else:
                # a rollback-journal writer may keep the database busy: that tick is
                # skipped with SQLite's message, never published half done
                assert "opencode.db" in proc.stderr + proc.stdout, proc.stderr
                failures.append(proc.stderr)
            seen = commits()
            wait_for(lambda: commits() > seen, 60, "a commit after this checkpoint")
        assert writer.poll() is None, "the writer died"
    finally:
        stop.touch()
        writer.wait(30)
    assert writer.returncode == 0
    assert len(seqs) >= 4, (seqs, failures)
    last_n = 0
    for seq in seqs:
        _, got = box.restore_at(seq, tmp_path / f"out-{seq}")
        assert integrity(got) == "ok", seq
        con = sqlite3.connect(got)
        try:
            n = con.execute("SELECT n FROM meta").fetchone()[0]
            rows = con.execute("SELECT id, k, v FROM t ORDER BY id").fetchall()
        finally:
            con.close()
        assert n >= last_n, "checkpoints went back in time"
        last_n = n
        assert rows == expected_rows(n), f"checkpoint {seq} is not the committed state after commit {n}"
    proc = box.run("verify", "--full")
    assert "0 errors" in proc.stdout


# --------------------------------------------------------------------------- 3. damaged page groups


def _history_with_groups(tmp_path: Path, ticks: int = 5) -> Churned:
    """A database with a full map and delta ticks (group deltas, cumulative and recent maps)."""
    box = Churned(tmp_path)
    rng = random.Random(3)
    con = new_db(box.db, page_size=1024)
    insert(con, rng, 3000)
    box.save_expected(box.tick(), con)
    for tick in range(ticks):
        con.execute("BEGIN")
        for _ in range(30):
            con.execute("UPDATE t SET v = ? WHERE id = ?", (rng.randbytes(rng.randrange(5, 300)), rng.randrange(1, 3000)))
        con.execute("COMMIT")
        insert(con, rng, 3)
        box.save_expected(box.tick(), con)
    con.close()
    return box


def _assert_never_wrong(box: Churned, proc: subprocess.CompletedProcess, got: Path, newest: int) -> str:
    """A restore over damage: the newest copy (exit 0), an older checkpoint's exact copy
    with a warning (a fallback: exit 3), or reported lost (exit 1) with no database;
    never anything else."""
    text = proc.stdout + proc.stderr
    if proc.returncode == 1:
        assert "LOST" in text and "opencode.db" in text, text
        assert not got.exists(), "a lost database must not be written"
        return "lost"
    assert got.is_file()
    matches = [seq for seq, want in box.expected.items() if got.read_bytes() == want.read_bytes()]
    assert matches, "restore produced a database equal to no checkpoint"
    assert integrity(got) == "ok"
    if max(matches) != newest:
        assert proc.returncode == 3 and "damaged" in text and "restored from manifest" in text, text
        return "fallback"
    assert proc.returncode == 0, text
    return "newest"


def test_a_damaged_group_delta_falls_back_and_verify_full_reports_it(tmp_path):
    box = _history_with_groups(tmp_path)
    newest = max(box.expected)
    deltas = [(rec, members) for rec, flags, members in group_records(box, newest) if flags & FLAG_DELTA]
    assert deltas and all(m for _, m in deltas), "the newest snapshot holds group deltas with members"
    rec, _ = deltas[0]
    corrupt(box.store_path, rec.pack, rec.offset + rec.length - 5)  # inside the zstd frame
    proc, got = box.restore_at(newest, tmp_path / "out", ok=False)
    assert _assert_never_wrong(box, proc, got, newest) in ("fallback", "lost")
    proc = box.run("verify", "--full", expect=None)
    assert proc.returncode == 1 and f"manifest {newest}: {TREE}/{DB}" in proc.stdout, proc.stdout


def test_a_damaged_member_list_is_never_decoded_against_other_pages(tmp_path):
    """The member list sits before the frame, outside the payload hash: flip a byte of a
    member's page number so the dictionary is made of other pages."""
    box = _history_with_groups(tmp_path)
    newest = max(box.expected)
    deltas = [(rec, members) for rec, flags, members in group_records(box, newest) if flags & FLAG_MEMBERS]
    rec, members = max(deltas, key=lambda d: len(d[1]))
    # last byte of the first member's u32 page number
    corrupt(box.store_path, rec.pack, rec.offset + HEADER.size + 2 + 3)
    proc, got = box.restore_at(newest, tmp_path / "out", ok=False)
    assert _assert_never_wrong(box, proc, got, newest) in ("fallback", "lost")
    assert box.run("verify", "--full", expect=None).returncode == 1


def test_a_damaged_whole_group_of_the_full_map_is_reported_lost_not_rebuilt_wrong(tmp_path):
    box = _history_with_groups(tmp_path)
    newest = max(box.expected)
    snap = box.db_snapshot(newest)
    # a whole group of the full map that the final snapshot still uses for some pages
    used = {(loc.rec.pack, loc.rec.offset) for loc in snap.pages if not loc.delta}
    rec = next(loc.rec for loc in snap.base.values() if (loc.rec.pack, loc.rec.offset) in used)
    corrupt(box.store_path, rec.pack, rec.offset + HEADER.size + 10)
    proc, got = box.restore_at(newest, tmp_path / "out", ok=False)
    assert _assert_never_wrong(box, proc, got, newest) == "lost"
    proc = box.run("verify", "--full", expect=None)
    assert proc.returncode == 1
    assert proc.stdout.count("bad-snapshot") == len(box.expected), proc.stdout


# --------------------------------------------------------------------------- 4. gc


def test_gc_keep_last_one_then_restore_continue_and_a_fresh_container(tmp_path):
    box = Churned(tmp_path)
    rng = random.Random(9)
    con = new_db(box.db, page_size=1024)
    insert(con, rng, 2500)
    box.save_expected(box.tick(), con)
    for tick in range(14):
        insert(con, rng, rng.randrange(1, 30))
        con.execute("UPDATE t SET v = ? WHERE id = ?", (rng.randbytes(80), rng.randrange(1, 2500)))
        if tick == 5:  # a new full map: more than 1024 pages differ
            insert(con, rng, 1500, big=True)
        if tick == 9:
            con.execute("DELETE FROM t WHERE id % 4 = 0")
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.execute("VACUUM")
        box.save_expected(box.tick(), con)
    kept = max(box.expected)
    assert len(box.entry(kept).refs) >= 2, "the kept snapshot is a delta over a full map"
    for _ in range(2):
        box.run("gc", "--keep-last", "1", "--grace", "0s")
    assert box.repo().manifest_seqs() == [kept]
    _, got = box.restore_at(kept, tmp_path / "out-kept")
    assert_same_db(got, box.expected[kept], "the kept checkpoint after gc")
    assert "0 errors" in box.run("verify", "--full").stdout
    # the same container keeps checkpointing on the kept snapshot's maps
    for tick in range(4):
        insert(con, rng, 7)
        con.execute("UPDATE t SET v = ? WHERE id = ?", (rng.randbytes(90), rng.randrange(1, 2500)))
        box.save_expected(box.tick(), con)
    con.close()
    for _ in range(2):
        box.run("gc", "--keep-last", "1", "--grace", "0s")
    newest = max(box.expected)
    _, got = box.restore_at(newest, tmp_path / "out-newest")
    assert_same_db(got, box.expected[newest], "checkpoint after gc")
    # a fresh container: no base copy, no map cache; restores, then writes deltas
    other = Churned(tmp_path, box.store_path, name="b")
    other.run("restore")
    assert_same_db(other.db, box.expected[newest], "fresh container restore")
    con = sqlite3.connect(other.db, isolation_level=None)
    insert(con, rng, 20)
    seq = other.tick()
    other.save_expected(seq, con)
    con.close()
    assert len(other.entry(seq).refs) >= 2
    other.gc_then_restore(seq, tmp_path / "out-b", "fresh container's delta after gc")


# --------------------------------------------------------------------------- 5. the file changes under journal


def test_a_database_replaced_or_truncated_between_checkpoints(tmp_path):
    box = Churned(tmp_path)
    rng = random.Random(5)
    con = new_db(box.db, page_size=4096, wal=False)
    insert(con, rng, 800)
    con.close()
    box.save_expected(box.tick())
    # replaced by a different, smaller database with the same page size (a delta map)
    other = tmp_path / "other.db"
    con = new_db(other, page_size=4096, wal=False)
    insert(con, random.Random(6), 100)
    con.close()
    os.replace(other, box.db)
    box.save_expected(box.tick())
    # replaced by a database with another page size (a new full map)
    con = new_db(other, page_size=8192, wal=False)
    insert(con, random.Random(7), 400)
    con.close()
    os.replace(other, box.db)
    box.save_expected(box.tick())
    # cut short mid-file: never published, or published only if SQLite finds it whole
    size = box.db.stat().st_size
    before = max(box.expected)
    with open(box.db, "r+b") as fh:
        fh.truncate(size // 2 + 1000)
    proc = box.run("checkpoint", expect=None)
    if proc.returncode == 0:
        box.save_expected(max(box.repo().manifest_seqs()))
    else:
        assert "opencode.db" in proc.stderr, proc.stderr
        assert max(box.repo().manifest_seqs()) == before
    # emptied: a 0-byte file is an empty database
    with open(box.db, "r+b") as fh:
        fh.truncate(0)
    seq = box.tick()
    box.save_expected(seq)
    for seq, want in box.expected.items():
        _, got = box.restore_at(seq, tmp_path / f"out-{seq}")
        assert_same_db(got, want, f"checkpoint {seq}")


# --------------------------------------------------------------------------- 6. sizes at the edges


def test_group_deltas_with_the_most_members_and_the_fewest(tmp_path):
    """512-byte pages: 512 pages to a whole group and 256 members to a group delta (the
    most a delta can name); 65536-byte pages: 4 and 2."""
    for page_size, delta_members in ((512, 256), (65536, 2)):
        box = Churned(tmp_path / str(page_size))
        rng = random.Random(page_size)
        con = new_db(box.db, page_size=page_size, wal=True)
        insert(con, rng, 6000 if page_size == 512 else 8000)
        box.save_expected(box.tick(), con)
        # rewrite enough rows to dirty more than a delta group's worth of pages
        con.execute("UPDATE t SET v = randomblob(length(v)) WHERE id % 9 = 0")
        box.save_expected(box.tick(), con)
        insert(con, rng, 50)
        con.execute("UPDATE t SET v = randomblob(length(v)) WHERE id % 40 = 1")
        box.save_expected(box.tick(), con)
        con.close()
        full = box.entry(min(box.expected))
        sizes = [len(m) for seq in box.expected for _, f, m in group_records(box, seq) if f & FLAG_MEMBERS]
        assert max(sizes) == delta_members, sizes
        whole = [r.size // page_size for r, f, _ in group_records(box, min(box.expected)) if not f & FLAG_DELTA]
        assert max(whole) == (256 << 10) // page_size
        assert len(full.refs) == 1
        for seq, want in box.expected.items():
            _, got = box.restore_at(seq, tmp_path / f"out-{page_size}-{seq}")
            assert_same_db(got, want, f"page size {page_size}, checkpoint {seq}")


def test_a_single_page_database_and_an_empty_file(tmp_path):
    box = Churned(tmp_path)
    box.db.write_bytes(b"")  # 0 bytes: SQLite reads it as an empty database
    box.save_expected(box.tick())
    con = sqlite3.connect(box.db, isolation_level=None)
    con.execute("PRAGMA user_version=7")  # still one page
    box.save_expected(box.tick(), con)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES ('one')")
    box.save_expected(box.tick(), con)
    con.execute("DROP TABLE t")
    con.execute("VACUUM")  # back to one page: a delta map shorter than its full map
    assert box.db.stat().st_size == 4096
    box.save_expected(box.tick(), con)
    con.close()
    for seq, want in box.expected.items():
        _, got = box.restore_at(seq, tmp_path / f"out-{seq}")
        assert_same_db(got, want, f"checkpoint {seq}")
    assert "0 errors" in box.run("verify", "--full").stdout



def test_a_reused_group_delta_whose_member_is_past_the_new_end_restores_after_gc(tmp_path):
    """A group delta [12, 200] written while the file had 203 pages is reused for page 12
    after an incremental vacuum cut the file to 78 pages: its dictionary still needs the
    full map's page 200, past the end; gc must keep it and restore must decode with it."""
    box = Churned(tmp_path)
    con = sqlite3.connect(box.db, isolation_level=None)
    con.execute("PRAGMA auto_vacuum=INCREMENTAL")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, bytes([i % 256]) * 1000) for i in range(1, 801)])
    con.execute("COMMIT")
    box.save_expected(box.tick(), con)
    con.execute("UPDATE t SET v = ? WHERE id IN (40, 790)", (b"z" * 1000,))
    second = box.tick()
    box.save_expected(second, con)
    con.execute("DELETE FROM t WHERE id > 300")
    con.executescript("PRAGMA incremental_vacuum")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    third = box.tick()
    box.save_expected(third, con)
    con.close()
    before, after = box.db_snapshot(second), box.db_snapshot(third)
    count = len(after.pages)
    reused = [p for p in after.deltas if p < len(before.pages) and before.pages[p] == after.pages[p]]
    assert reused, "a group delta of the second snapshot is reused by the third"
    past = {rec.offset: m for rec, flags, m in group_records(box, third) if m and max(m) >= count}
    assert any(rec.offset in past for rec in (after.pages[p].rec for p in reused)), \
        "the reused group delta names a member past the new end of the file"
    box.gc_then_restore(third, tmp_path / "out", "after gc")


# --------------------------------------------------------------------------- 7. damage the writer and the reader must survive


def test_a_good_snapshot_is_not_lost_over_a_damaged_full_map_record_it_does_not_need(tmp_path):
    """A base page the store cannot serve makes the changed page whole (design §7), so a
    snapshot whose every page was stored again needs nothing from its full map: quick
    verify checks full-map pages only "when the snapshot has deltas". Restore must then
    rebuild it from its own, intact records."""
    box = Churned(tmp_path)
    con = new_db(box.db, page_size=4096, wal=False)
    insert(con, random.Random(1), 300)
    con.close()
    first = box.tick()
    box.save_expected(first)
    # the database is replaced by another one of the same page size (every page differs,
    # fewer than 1024: a delta map over the first full map)
    other = tmp_path / "other.db"
    con = new_db(other, page_size=4096, wal=False)
    con.execute("CREATE TABLE z(a)")
    insert(con, random.Random(2), 250)
    con.close()
    os.replace(other, box.db)
    # meanwhile the first snapshot's page group rots in the store, and the local base
    # copy (a cache) is gone
    old = {(loc.rec.pack, loc.rec.offset): loc.rec for loc in box.db_snapshot(first).base.values()}
    for rec in old.values():
        corrupt(box.store_path, rec.pack, rec.offset + HEADER.size + 10)
    shutil.rmtree(box.local / ".journal" / "sqlite-base")
    second = box.tick()
    box.save_expected(second)
    snap = box.db_snapshot(second)
    assert len(box.entry(second).refs) == 2, "a delta map over the damaged full map"
    assert not snap.deltas, "every changed page was stored whole (its base could not be read)"
    assert not [loc for loc in snap.pages if (loc.rec.pack, loc.rec.offset) in old], \
        "no page of the second snapshot lives in the damaged record"
    proc, got = box.restore_at(second, tmp_path / "out", ok=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_db(got, box.expected[second], "a snapshot whose own records are intact")
    audit = json.loads(box.run("verify", "--full", "--json", expect=None).stdout)
    assert {(f["kind"], f["manifest"]) for f in audit["findings"]} >= {("bad-snapshot", first)}
    assert not audit["ok"], "the audit still reports the rotten record"


def test_a_damaged_previous_page_map_does_not_stop_every_later_checkpoint(tmp_path):
    """The state dir is lost while the live tree survives (a hot restart): restore keeps
    the valid local database without reading its maps, and says "restore complete". The
    stored map of that database has rotted. The next checkpoints must still commit the
    other trees (design §7: a database that cannot be snapshotted is reported, "the
    checkpoint finishes the other files and trees, commits them")."""
    box = Churned(tmp_path)
    con = new_db(box.db, page_size=4096)
    insert(con, random.Random(1), 300)
    con.close()
    codex = box.local / "codex-home"
    codex.mkdir()
    (codex / "config.toml").write_text("model = 'a'\n")
    box.run("checkpoint")
    mref = box.entry(1).refs[0]
    corrupt(box.store_path, mref.pack, mref.offset + mref.length - 3)
    shutil.rmtree(box.local / ".journal")
    proc = box.run("restore")
    assert "restore complete" in proc.stdout and "keep-valid-db" in proc.stdout, proc.stdout
    (codex / "config.toml").write_text("model = 'b'\n")
    con = sqlite3.connect(box.db, isolation_level=None)
    insert(con, random.Random(2), 5)
    box.save_expected(2, con)
    con.close()
    for _ in range(2):  # a later tick does no better
        proc = box.run("checkpoint", expect=None)
    seqs = box.repo().manifest_seqs()
    assert seqs[-1] > 1, f"no checkpoint committed any more: {proc.stdout} {proc.stderr}"
    out = tmp_path / "out"
    box.run("restore", "--to", str(out), expect=None)
    assert (out / "codex" / "config.toml").read_text() == "model = 'b'\n"
    got = out / TREE / DB
    if proc.returncode == 0:  # the database was published again, whole
        assert_same_db(got, box.expected[2], "the database after its old map rotted")
    else:
        assert "opencode.db" in proc.stderr, proc.stderr


def test_a_page_map_naming_65536_packs_names_each_one(tmp_path):
    """The record table's pack index is a u16 and 0xFFFF means "the map's own pack"
    (design §7). A full map reuses every unchanged page's record from the pack it was
    first written to, so an append-heavy database's full map names one more pack for
    nearly every tick that grew it (measured: 228 packs after 300 ticks). Whatever the
    count, a map must never name a page's record in the wrong pack."""
    import hashlib

    from journal.format.model import BlobRef
    from journal.format.pagemap import PageLoc, encode_map

    n = 0x10000
    pages = {}
    for pgno in range(n):
        rec = BlobRef(hashlib.sha256(b"r%d" % pgno).hexdigest(), f"{pgno + 1:064x}", 0, 100, 512)
        pages[pgno] = PageLoc(hashlib.sha256(b"p%d" % pgno).hexdigest(), rec, 0)
    own = "f" * 64
    try:
        payload = encode_map(True, 512, n, pages, lambda ref: ref.pack)
    except ValueError as err:  # refusing, naming the limit, is fine; misplacing is not
        assert "at most 65535 packs" in str(err), err
        return
    _, got = decode_map(payload, own, "test map")
    wrong = [p for p in range(n) if got[p].rec.pack != pages[p].rec.pack]
    assert not wrong, (f"{len(wrong)} page(s) decode to another pack, e.g. page {wrong[0]}: "
                       f"{got[wrong[0]].rec.pack[:12]} (the map's own pack) instead of {pages[wrong[0]].rec.pack[:12]}")
