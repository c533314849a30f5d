"""Page maps over many ticks: the cumulative map, then a small recent map (format/pagemap.py).

A tick's map must grow with that tick's changes, not with every page changed since
the full map; and whatever the maps, a restore of any checkpoint must equal the
database as it was then, including pages that changed back and a file that shrank.
"""

from __future__ import annotations

import functools
import random
import shutil
import sqlite3
import uuid
from pathlib import Path

import msgspec
import pytest

from conftest import Audit, Live, OpencodeLive, journal_script
from journal.cli.app import EXIT_FALLBACK
from journal.config import load_config
from journal.repository.history import ManifestCache
from journal.format.model import TreeRoot
from journal.format.objects import KIND_PAGEMAP, encode_record
from journal.format.pagemap import RECENT_MIN, RECENT_SHARE, decode_map, encode_map, load_snapshot
from journal.repository.repository import Repository
from journal.store import open_store
from journal.verify import BAD_SNAPSHOT, verify

TREE, DB = OpencodeLive.TREE, OpencodeLive.DB


class Growing(OpencodeLive):
    """A container whose HOME is ``root``, with an opencode database of 6,000 rows that
    grows by ``insert`` (rows from ``rng``, seeded: the same calls make the same pages)."""

    def __init__(self, root: Path):
        super().__init__(root, root / "store")
        self.root = root
        self.con = sqlite3.connect(self.db, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("CREATE TABLE m(id TEXT PRIMARY KEY, n INTEGER, body TEXT)")
        self.rng = random.Random(7)
        self.insert(6000)

    def insert(self, n: int) -> None:
        self.con.execute("BEGIN")
        for i in range(n):
            self.con.execute("INSERT INTO m VALUES (?, ?, ?)", (str(uuid.UUID(int=self.rng.getrandbits(128))), i,
                                                                 f"row {self.rng.getrandbits(64):x} " * 6))
        self.con.execute("COMMIT")

    def tick(self) -> int:
        """An in-process checkpoint, which must commit with no warning; its seq."""
        seq = super().tick()
        assert seq is not None
        return seq

    def rows(self, path: Path | None = None) -> list[tuple]:
        con = sqlite3.connect(path or self.db)
        try:
            return con.execute("SELECT id, n, body FROM m ORDER BY id").fetchall()
        finally:
            con.close()

    def restored_rows(self, seq: int) -> list[tuple]:
        dest = self.root / f"out-{seq}-{len(list(self.root.glob(f'out-{seq}-*')))}"   # an export wants a new dir
        assert self.restore(at=str(seq), to=str(dest)).complete
        path = dest / TREE / DB
        con = sqlite3.connect(path)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            con.close()
        return self.rows(path)


def test_a_ticks_map_stays_small_and_every_checkpoint_restores(tmp_path):
    box = Growing(tmp_path)
    box.tick()
    expect: dict[int, list[tuple]] = {}
    seen_three = False
    smallest = 1.0
    for tick in range(40):
        box.insert(3)
        box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = ?", (box.rng.randrange(1, 6000),))
        seq = box.tick()
        expect[seq] = box.rows()
        refs = box.entry(seq).refs
        assert 1 <= len(refs) <= 3
        if len(refs) == 3:
            seen_three = True
            repo = box.repo()
            _, cumulative = decode_map(repo.read_blob(refs[1], KIND_PAGEMAP), refs[1].pack, "t")
            _, recent = decode_map(repo.read_blob(refs[2], KIND_PAGEMAP), refs[2].pack, "t")
            assert len(recent) <= max(RECENT_MIN, (len(cumulative) + len(recent)) // RECENT_SHARE)
            changed = load_snapshot(refs, repo.read_blob)
            differing = sum(1 for p, loc in enumerate(changed.pages) if changed.base.get(p) != loc)
            smallest = min(smallest, len(recent) / differing)
    assert seen_three, "a small tick over a cumulative map writes a recent map"
    assert smallest < 0.5, "the recent map lists far fewer pages than differ from the full map"
    for seq in list(expect)[::7] + [max(expect)]:
        assert box.restored_rows(seq) == expect[seq], seq
    assert verify(box.repo(), full=True).ok


def test_a_map_added_once_the_data_pack_is_full_stays_in_that_pack(tmp_path, monkeypatch):
    """A page map names the pages of its own pack as "same pack": added just as the data
    pack reaches its target size, it must go into that pack, not open the next one, or
    no restore finds those pages; the next tick's map, built on it, restores too."""
    import journal.checkpoint.run as checkpoint_module
    from journal.repository.pack import PackWriter

    probe = Growing(tmp_path / "probe")
    (full_map,) = probe.entry(probe.tick()).refs
    boundary = full_map.offset              # the data pack's size once its last page is in
    box = Growing(tmp_path / "box")             # the same database (the same seed): the same pages
    monkeypatch.setattr(checkpoint_module, "PackWriter", functools.partial(PackWriter, target=boundary))
    seq = box.tick()
    monkeypatch.undo()

    (map_ref,) = box.entry(seq).refs
    assert (map_ref.offset, map_ref.length) == (boundary, full_map.length)   # appended to the full pack
    assert box.restored_rows(seq) == box.rows()
    box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = 1")
    seq = box.tick()
    assert box.restored_rows(seq) == box.rows()
    assert verify(box.repo(), full=True).ok


def test_pages_that_change_back_and_a_file_that_shrinks_restore_exactly(tmp_path):
    box = Growing(tmp_path)
    box.tick()
    box.insert(40)  # a cumulative map with these pages
    first = box.tick()
    # change a row and change it back: its page may equal the full map's page again
    row = box.con.execute("SELECT id, body FROM m LIMIT 1").fetchone()
    box.con.execute("UPDATE m SET body = ? WHERE id = ?", ("x" * len(row[1]), row[0]))
    box.tick()
    box.con.execute("UPDATE m SET body = ? WHERE id = ?", (row[1], row[0]))
    reverted = box.tick()
    expect = {first: None, reverted: box.rows()}
    # shrink the file below pages the cumulative map lists
    box.con.execute("DELETE FROM m WHERE n > 100")
    box.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    box.con.execute("VACUUM")
    shrunk = box.tick()
    expect[shrunk] = box.rows()
    refs = box.entry(shrunk).refs
    snap = load_snapshot(refs, box.repo().read_blob)
    assert len(refs) >= 2 and len(snap.pages) < len(snap.base), "a delta over a longer full map"
    box.insert(5)
    grown = box.tick()
    expect[grown] = box.rows()
    for seq, rows in expect.items():
        if rows is not None:
            assert box.restored_rows(seq) == rows, seq
    assert verify(box.repo(), full=True).ok


def test_a_format_4_store_is_carried_on_by_the_format_5_writer(tmp_path):
    """A store whose newest snapshot is a version 2 delta map with one-page deltas
    (tests/golden/sqlite-v2): restore it, keep writing, checkpoint twice with the
    current writer; every checkpoint, old and new, restores exactly and verifies."""
    golden = Path(__file__).parent / "golden" / "sqlite-v2" / "store"
    store = tmp_path / "store"
    shutil.copytree(golden, store)
    local = tmp_path / "local"
    run = Live(tmp_path, store, local=local, expect=0, cmd=journal_script()).run

    run("restore")
    db = local / "hermes" / "state.db"
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    expect = {}
    for tick in range(2):
        con.execute("BEGIN")
        con.executemany("INSERT INTO notes VALUES (?, ?, ?)",
                        [(1000 + 10 * tick + i, f"t{tick}", "new row " * 30) for i in range(10)])
        con.execute("UPDATE notes SET body = body || ? WHERE id IN (SELECT id FROM notes ORDER BY id LIMIT 3)",
                    (f" tick {tick}",))
        con.execute("COMMIT")
        run("checkpoint")
        seq = 4 + tick
        expect[seq] = con.execute("SELECT id, title, body FROM notes ORDER BY id").fetchall()
    con.close()
    for seq in (3, 4, 5):
        out = tmp_path / f"out-{seq}"
        run("restore", "--at", str(seq), "--to", str(out))
        got = sqlite3.connect(out / "hermes" / "state.db")
        try:
            assert got.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            rows = got.execute("SELECT id, title, body FROM notes ORDER BY id").fetchall()
        finally:
            got.close()
        if seq in expect:
            assert rows == expect[seq], seq
    run("verify", "--full")
    # the new checkpoints built on the old maps: a format-4 (version 2) delta map as the
    # cumulative map, under a version 3 recent map whose pages override its one-page deltas
    repo = Repository.open(open_store(str(store)))
    old = next(e for e in ManifestCache(repo).tree(3, "hermes")[0] if e.path == "state.db")
    new = next(e for e in ManifestCache(repo).tree(4, "hermes")[0] if e.path == "state.db")
    assert len(old.refs) == 2 and new.refs[:2] == old.refs and len(new.refs) == 3
    versions = [decode_map(repo.read_blob(r, KIND_PAGEMAP), r.pack, "t")[0].version for r in new.refs]
    assert versions[1:] == [2, 3]
    snap = load_snapshot(new.refs, repo.read_blob)
    assert not any(loc.legacy for loc in snap.pages), "no one-page delta is reused by the new writer"


def test_a_page_size_change_writes_a_new_full_map_and_both_checkpoints_restore(tmp_path):
    box = Growing(tmp_path)
    box.con.execute("PRAGMA journal_mode=DELETE")  # the page size changes only outside WAL
    first = box.tick()
    rows_first = box.rows()
    box.con.execute("PRAGMA page_size=8192")
    box.con.execute("VACUUM")
    assert box.con.execute("PRAGMA page_size").fetchone()[0] == 8192
    box.insert(5)
    second = box.tick()
    refs = box.entry(second).refs
    snap = load_snapshot(refs, box.repo().read_blob)
    assert len(refs) == 1 and snap.page_size == 8192
    assert box.restored_rows(first) == rows_first
    assert box.restored_rows(second) == box.rows()
    box.insert(3)  # and a delta over the new full map
    third = box.tick()
    assert len(box.entry(third).refs) == 2 and box.restored_rows(third) == box.rows()
    assert verify(box.repo(), full=True).ok


def test_a_full_map_names_a_bounded_number_of_packs_and_every_checkpoint_restores(tmp_path, monkeypatch):
    """A full map reuses each unchanged page from the pack it was first written to, so
    a database that keeps changing would name one more pack at every full map, up to
    the record table's limit (index 0xFFFF is the map's own pack). The writer keeps it
    under MAP_PACKS by storing the pages of the least-used packs again. Here the bound
    is 6 and every tick writes a full map."""
    from journal.sqlite import capture as sqlite_capture
    from journal.format.pagemap import PageLoc, encode_map
    from journal.format.model import BlobRef

    monkeypatch.setattr(sqlite_capture, "DELTA_MIN", 0)
    monkeypatch.setattr(sqlite_capture, "DELTA_SHARE", 1 << 30)   # any change: a new full map
    monkeypatch.setattr(sqlite_capture, "MAP_PACKS", 6)
    monkeypatch.setattr(sqlite_capture, "MAP_PACKS_KEPT", 3)
    box = Growing(tmp_path)
    box.tick()
    expect: dict[int, list[tuple]] = {}
    most, pruned = 0, False
    for tick in range(14):
        box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = ?", (box.rng.randrange(1, 6000),))
        seq = box.tick()
        expect[seq] = box.rows()
        refs = box.entry(seq).refs
        assert len(refs) == 1  # a full map at every tick
        pm, _ = decode_map(box.repo().read_blob(refs[0], KIND_PAGEMAP), refs[0].pack, "t")
        pruned |= len(pm.packs) < most
        most = max(most, len(pm.packs))
    assert most <= 6 + 1, most   # the bound, plus the open pack's own pages (not in the table)
    assert pruned, "the least-used packs' pages were stored again"
    for seq in expect:
        assert box.restored_rows(seq) == expect[seq], seq
    assert verify(box.repo(), full=True).ok

    # encode_map refuses a 65,536th pack rather than naming it as its own
    rec = lambda i: BlobRef("0" * 64, f"{i + 1:064x}", 0, 10, 512)  # noqa: E731
    pages = {i: PageLoc("1" * 64, rec(i), 0) for i in range(0xFFFF + 1)}
    try:
        encode_map(True, 512, len(pages), pages, lambda ref: ref.pack)
    except ValueError as err:
        assert "at most 65535 packs" in str(err)
    else:
        raise AssertionError("a map naming 65,536 packs was encoded")


def _map_records(box, refs):
    """(flags, stored bytes, base) of each map record an entry names (format 6)."""
    from journal.format.objects import parse_header
    from journal.repository.repository import pack_key

    repo, out = box.repo(), []
    for ref in refs:
        data = repo.store.get(pack_key(ref.pack), ref.offset, ref.offset + ref.length)
        flags = parse_header(data, key="map").flags
        _, base = repo.read_based(ref, KIND_PAGEMAP)
        out.append((flags, ref.length, base))
    return out


def test_a_growing_map_is_stored_as_a_delta_of_the_previous_one_and_gc_keeps_its_base(tmp_path):
    """Format 6: a tick's map repeats most of the previous tick's (the same slots and
    records), so it is stored against it and costs a fraction of its size; a delta's
    base is a whole map, every checkpoint restores, and gc keeps the base's pack."""
    from journal.format.objects import FLAG_BASE_AT, FLAG_DELTA, encode_record

    box = Growing(tmp_path)
    box.tick()
    expect, deltas = {}, []
    for tick in range(12):
        box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = ?", (box.rng.randrange(1, 6000),))
        seq = box.tick()
        expect[seq] = box.rows()
        refs = box.entry(seq).refs
        for ref, (flags, length, base) in zip(refs, _map_records(box, refs)):
            if flags & FLAG_DELTA:
                assert flags == FLAG_DELTA | FLAG_BASE_AT and base is not None
                assert _map_records(box, [base])[0][0] == 0, "a map delta's base is a whole map"
                deltas.append((length, len(encode_record(KIND_PAGEMAP, box.repo().read_blob(ref, KIND_PAGEMAP))[1])))
    assert len(deltas) >= 6, "maps are stored as deltas"
    stored, whole = sum(d for d, _ in deltas), sum(w for _, w in deltas)
    assert stored * 2 < whole, deltas
    for seq in list(expect)[::4] + [max(expect)]:
        assert box.restored_rows(seq) == expect[seq], seq
    assert verify(box.repo(), full=True).ok
    newest = max(expect)
    from journal.gc.run import gc
    from journal.gc.retention import Policy

    for _ in range(2):  # mark, then sweep everything but the newest checkpoint
        gc(box.repo(), Policy(keep_last=1), 0.0)
    assert box.repo().manifest_seqs() == [newest]
    assert verify(box.repo(), full=True).ok
    assert box.restored_rows(newest) == expect[newest]


def test_an_unknown_or_damaged_local_base_record_stores_the_map_whole(tmp_path):
    """The writer deltas a map only against one it knows is whole (``maps/<id>.base``);
    without that record, or with a damaged one, the new map is stored whole."""
    from journal.format.objects import FLAG_DELTA

    box = Growing(tmp_path)
    box.tick()
    for tick in range(6):
        box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = ?", (box.rng.randrange(1, 6000),))
        box.tick()
    maps_dir = Path(load_config(env=box.env).state_dir) / "maps"
    for i, damage in enumerate((None, b"{not json", b"")):
        for side in maps_dir.glob("*.base"):
            if damage is None:
                side.unlink()
            else:
                side.write_bytes(damage)
        before = set(box.entry(box.repo().manifest_seqs()[-1]).refs)
        box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = ?", (box.rng.randrange(1, 6000),))
        seq = box.tick()
        new = [r for r in box.entry(seq).refs if r not in before]
        assert new and all(not flags & FLAG_DELTA for flags, _, _ in _map_records(box, new)), i
        assert box.restored_rows(seq) == box.rows()


def test_a_local_record_wrongly_saying_whole_never_yields_a_delta_of_a_delta(tmp_path):
    """If ``maps/<id>.base`` wrongly says a delta map is whole (and its bytes are not
    local), that map, read from the store to serve as a base, is refused: the next map
    in its place is stored whole, and every reader still decodes every map."""
    from journal.repository.blob_cache import BlobCache
    from journal.format.objects import FLAG_DELTA
    from journal.format.pagemap import MapPlace
    from journal.sqlite.capture import _map_base

    box = Growing(tmp_path)
    box.tick()
    for tick in range(20):
        box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = ?", (box.rng.randrange(1, 6000),))
        seq = box.tick()
        refs = box.entry(seq).refs
        if len(refs) == 3 and _map_records(box, refs)[2][0] & FLAG_DELTA:
            break
    else:
        raise AssertionError("no recent map was stored as a delta")
    cfg = load_config(env=box.env)
    maps_dir = Path(cfg.state_dir) / "maps"
    (maps_dir / refs[2].id).unlink()
    (maps_dir / f"{refs[2].id}.base").write_bytes(b"whole")   # a lie
    assert _map_base(refs, MapPlace.RECENT, BlobCache(cfg.state_dir, box.repo(), bases=True)) is None
    box.con.execute("UPDATE m SET n = n + 1 WHERE rowid = ?", (box.rng.randrange(1, 6000),))
    seq = box.tick()
    for flags, _, base in _map_records(box, box.entry(seq).refs):   # each decodes, bases included
        assert base is None or _map_records(box, [base])[0][0] == 0
    assert box.restored_rows(seq) == box.rows()
    assert verify(box.repo(), full=True).ok


# --- crafted maps --------------------------------------------------------------------------

NOT_HEX = "../" * 21 + "x"   # 64 characters, none of them a hex digit


def _with_db(live):
    """The fixture trees and an opencode database, checkpointed: the good copy."""
    (live.local / "opencode-share").mkdir()
    con = sqlite3.connect(live.local / "opencode-share" / DB)
    con.execute("CREATE TABLE m(id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO m(body) VALUES (?)", [(f"row {i} " * 20,) for i in range(400)])
    con.commit()
    con.close()
    live.checkpoint()
    return next(e for e in live.entries(TREE).values() if e.path == DB)


def _publish_db(live, entry, payload: bytes | None = None, **fields) -> None:
    """Manifest 2: the opencode tree with one database entry, its full map ``payload``."""
    if payload is not None:
        (ref,) = live.put_records([encode_record(KIND_PAGEMAP, payload) + (len(payload),)])
        fields["refs"] = (ref,)
    entry = msgspec.structs.replace(entry, **fields)
    live.publish({TREE: TreeRoot(root=live.put_tree([entry]), files=1, bytes=entry.size)})


def _full_map(live, entry) -> tuple:
    return decode_map(live.repo().read_blob(entry.refs[0], KIND_PAGEMAP), entry.refs[0].pack, "map")


@pytest.mark.parametrize("craft,detail,blocks_gc", [
    ("pack", f"page map names pack '{NOT_HEX}', which is not a pack name", True),
    ("past-end", "page map names a slot its record lacks, a page twice or one past its end", True),
    ("size", "the entry says", False)])
def test_a_crafted_page_map_is_a_damaged_snapshot_that_falls_back(live, make_live, craft, detail, blocks_gc):
    """A map naming a pack '../../x'-like (restore died in pack_key), a page past the
    map's own page count (written far past the file's end), or an entry whose size is
    not its pages' (restored as it was): the database is damaged, in this checkpoint."""
    entry = _with_db(live)
    pm, pages = _full_map(live, entry)
    if craft == "pack":
        _publish_db(live, entry, encode_map(True, pm.page_size, pm.page_count, pages, lambda r: NOT_HEX))
    elif craft == "past-end":
        _publish_db(live, entry, encode_map(True, pm.page_size, pm.page_count - 1, pages, lambda r: r.pack))
    else:  # the same pages in a map of its own: a restore tries the older copy, whose refs differ
        _publish_db(live, entry, encode_map(True, pm.page_size, pm.page_count, pages, lambda r: r.pack),
                    size=entry.size + pm.page_size)

    audit = Audit(live, make_live)

    assert audit.verify.returncode == 1
    assert {(f["kind"], f["manifest"]) for f in audit.findings} == {(BAD_SNAPSHOT, 2)}
    assert detail in audit.findings[0]["detail"]
    assert audit.restore.returncode == EXIT_FALLBACK, audit.restore.stdout + audit.restore.stderr
    assert f"{TREE}/{DB}: restored from manifest 1" in audit.restore.stderr
    rows = sqlite3.connect(audit.fresh.local / "opencode-share" / DB).execute("SELECT count(*) FROM m").fetchone()
    assert rows == (400,)
    assert (audit.gc.returncode, "gc: checkpoint 2 (tree opencode) needs" in audit.gc.stderr) == (blocks_gc,) * 2
