"""Page deltas (format 2): a changed database page stored against its base page.

A page that changed since the snapshot's full map is stored compressed with the
full map's page of the same number as a zstd dictionary (``FLAG_DELTA``); its id is
still the hash of the page. These tests use real SQLite databases and real commits,
and assert bytes, counts and exact pages: what a delta tick uploads, that a delta
record decodes to the page and only with its base, that a damaged base is caught,
that gc keeps a base whose own page every later snapshot replaced, that full maps
never hold deltas, and that the local base copy spares the store reads it should.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import struct
import uuid
from pathlib import Path

import msgspec
import pytest
import zstandard

from conftest import OpencodeLive
from faults import FaultyStore
from journal.sqlite import capture as sqlite_capture
from journal.checkpoint.run import checkpoint
from journal.errors import CorruptObject, StoreError
from journal.format.codec import PLAIN, Codec
from journal.gc.run import gc
from journal.repository.history import ManifestCache
from journal.format.model import BlobRef
from journal.format.objects import (FLAG_DELTA, Members, FLAG_MEMBERS, HEADER, KIND_DBPAGE, KIND_MANIFEST, KIND_PAGE, MAGIC, decode_record,
                             embedded_members, encode_record, is_delta)
from journal.repository.repository import pack_key
from journal.format.pagemap import GROUP, SLOT, PageLoc, decode_map, encode_map, group_base
from journal.repository.repository import Repository
from journal.restore.run import restore
from journal.gc.retention import Policy
from journal.sqlite import base_copy as base_copy_mod
from journal.sqlite.base_copy import BASE_DIR, SAME_SUFFIX, base_path, prune_base_copies
from journal.sqlite.rebuild import rebuild_db
from journal.verify import BAD_SNAPSHOT, verify

TREE, DB = OpencodeLive.TREE, OpencodeLive.DB    # the opencode preset: $AM_LOCAL/opencode-share/opencode*.db


def commit(box: OpencodeLive, store=None):
    """An in-process checkpoint, which must commit a manifest."""
    result = box.checkpoint(store)
    assert result.seq is not None, result
    return result


def base_copy(box: OpencodeLive) -> Path:
    return Path(base_path(str(box.state_dir), box.entry().refs[0].id))


def copies(full_map_ids) -> list[str]:
    """The names a base copy folder holds for these full maps: each copy and its record."""
    return sorted(f"{i}.db{suffix}" for i in full_map_ids for suffix in ("", SAME_SUFFIX))


def fill(db: Path, rows: int, seed: int = 1) -> sqlite3.Connection:
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE message(id TEXT PRIMARY KEY, session TEXT, n INTEGER, data TEXT)")
    con.execute("CREATE INDEX message_session ON message(session, n)")
    rng = random.Random(seed)
    con.execute("BEGIN")
    con.executemany("INSERT INTO message VALUES (?, ?, ?, ?)",
                    [(str(uuid.UUID(int=rng.getrandbits(128))), f"ses_{rng.randrange(40)}", i,
                      " ".join(rng.choice(WORDS) for _ in range(40))) for i in range(rows)])
    con.execute("COMMIT")
    return con


WORDS = ("the agent read file wrote patch test passed failed tool call result assistant user message "
         "session token cache diff commit branch error retry plan step output").split()


def small_commits(con: sqlite3.Connection, n: int, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(n):
        con.execute("INSERT INTO message VALUES (?, ?, ?, ?)",
                    (str(uuid.UUID(int=rng.getrandbits(128))), f"ses_{rng.randrange(40)}", 10**6 + i,
                     " ".join(rng.choice(WORDS) for _ in range(40))))
        con.execute("UPDATE message SET n = n + 1 WHERE rowid = ?", (rng.randrange(1, 2000),))


def db_pages(path: Path) -> list[bytes]:
    data = path.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    return [data[i:i + size] for i in range(0, len(data), size)]


def record(box: OpencodeLive, loc) -> bytes:
    """The stored record holding a page (a PageLoc) or a blob (a BlobRef)."""
    ref = getattr(loc, "rec", loc)
    with open(box.store_path / pack_key(ref.pack), "rb") as fh:
        fh.seek(ref.offset)
        return fh.read(ref.length)


def page_bytes(repo: Repository, loc, page_size: int = 4096) -> bytes:
    """A page's bytes from its (whole) record, verified."""
    payload = repo.read_blob(loc.rec, KIND_DBPAGE)
    return payload[loc.slot * page_size:(loc.slot + 1) * page_size]


def rows(path: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT id, session, n, data FROM message ORDER BY id").fetchall()
    finally:
        con.close()


def rebuilt(box: OpencodeLive, tmp: Path, seq: int | None = None) -> Path:
    out = tmp / f"rebuilt-{seq}-{uuid.uuid4().hex[:6]}.db"
    rebuild_db(box.entry(seq), box.repo(), str(out))
    return out


def copy_of(db: Path, tmp: Path) -> Path:
    """A consistent copy of a live WAL database (what a snapshot holds)."""
    out = tmp / f"copy-{uuid.uuid4().hex[:6]}.db"
    src, dst = sqlite3.connect(db), sqlite3.connect(out)
    src.backup(dst)
    src.close()
    dst.execute("PRAGMA journal_mode=DELETE")
    dst.close()
    return out


# --------------------------------------------------------------------------- bytes and decoding


def test_a_delta_tick_stores_changed_pages_against_their_base_and_uploads_a_third(tmp_path):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 3000)
    commit(box)
    first = box.db_snapshot()
    small_commits(con, 6, seed=2)
    store = box.store
    puts, put_bytes = store.puts, store.put_bytes
    tick = commit(box, store)
    assert (tick.objects, store.puts - puts) == (3, 3)

    snap = box.db_snapshot()
    changed = [p for p in range(len(snap.pages)) if p not in snap.base or snap.pages[p] != snap.base[p]]
    assert snap.base == first.base, "a small tick is a delta over the same full map"
    assert len(snap.deltas) >= 5 and snap.deltas <= set(changed)
    assert snap.deltas & first.base.keys()

    # the tick's pages are one group delta (format 5): flagged, naming its members, and it
    # decodes to the exact pages only against the full map's pages of those members
    live = db_pages(copy_of(box.db, tmp_path))
    repo = box.repo()
    groups = {(snap.pages[p].rec.pack, snap.pages[p].rec.offset): snap.pages[p].rec for p in snap.deltas}
    assert len(groups) == 1, "one group delta per database per tick"
    delta_bytes = alone_bytes = 0
    for rec in groups.values():
        data = record(box, rec)
        head = HEADER.unpack_from(data)
        assert (head[2], head[3]) == (KIND_DBPAGE, FLAG_DELTA | FLAG_MEMBERS) and is_delta(data)
        members = embedded_members(data, key="t")
        assert members == sorted(members) and set(members) >= {p for p in snap.deltas if snap.pages[p].rec == rec}
        base = group_base(members, snap.base, lambda m: page_bytes(repo, snap.base[m]))
        payload = decode_record(data, key="t", expect_id=rec.id, base=base)
        for slot, p in enumerate(members):
            page = payload[slot * 4096:(slot + 1) * 4096]
            if snap.pages[p].rec == rec:
                assert page == live[p] and hashlib.sha256(page).hexdigest() == snap.pages[p].id
            alone_bytes += HEADER.size + len(zstandard.ZstdCompressor(level=3).compress(page))
        with pytest.raises(CorruptObject, match="without its base"):
            decode_record(data, key="t")
        with pytest.raises(CorruptObject):
            decode_record(data, key="t", base=base[4096:] + base[:4096])
        delta_bytes += len(data)
    assert delta_bytes * 4 < alone_bytes, (delta_bytes, alone_bytes)
    # what the tick uploaded is mostly those deltas: well under a whole-page upload
    assert store.put_bytes - put_bytes < alone_bytes
    out = rebuilt(box, tmp_path)
    assert rows(out) == rows(box.db)
    con.close()


def test_cumulative_delta_reuses_unchanged_deltas_and_only_whole_pages_past_the_base(tmp_path):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 1500)
    commit(box)
    small_commits(con, 4, seed=3)
    commit(box)
    second = box.db_snapshot()
    small_commits(con, 4, seed=4)
    con.execute("BEGIN")
    con.executemany("INSERT INTO message VALUES (?, ?, ?, ?)",
                    [(f"zz-{i:05d}", "grow", i, "x" * 900) for i in range(200)])  # new pages at the end
    con.execute("COMMIT")
    commit(box)
    third = box.db_snapshot()
    assert third.base == second.base
    grown = [p for p in range(len(second.pages), len(third.pages))]
    assert grown and not set(grown) & third.base.keys()
    # a page past the full map's end may share a group delta; it adds nothing to its
    # dictionary, so every member with a base is one the full map has
    repo = box.repo()
    for p in grown:
        data = record(box, third.pages[p])
        members = embedded_members(data, key="t") or []
        assert p in members or not is_delta(data)
        if is_delta(data):
            assert any(m in third.base for m in members), "a group delta has at least one base page"
            base = group_base(members, third.base, lambda m: page_bytes(repo, third.base[m]))
            assert decode_record(data, key="t", expect_id=third.pages[p].rec.id, base=base)
    kept = [p for p in second.deltas if third.pages[p] == second.pages[p]]
    for p in kept:
        assert p in third.deltas, "a delta carried over keeps its mark"
    counts = [len(rows(rebuilt(box, tmp_path, seq))) for seq in (1, 2, 3)]
    assert counts == [1500, 1504, 1708]
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


def test_a_new_full_map_lists_whole_pages_only(tmp_path, monkeypatch):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 1500)
    commit(box)
    small_commits(con, 5, seed=5)
    commit(box)
    deltas = box.db_snapshot().deltas
    assert deltas
    monkeypatch.setattr(sqlite_capture, "DELTA_MIN", 0)
    monkeypatch.setattr(sqlite_capture, "DELTA_SHARE", 10**9)   # any change now writes a full map
    small_commits(con, 1, seed=6)
    commit(box)
    entry = box.entry()
    assert len(entry.refs) == 1
    pm, pages = decode_map(box.repo().read_blob(entry.refs[0]), entry.refs[0].pack, "t")
    assert pm.full and pm.version == 3 and pm.deltas == b""
    assert not any(is_delta(record(box, loc)) for loc in pages.values())
    # the pages that were deltas were stored again, whole, in this checkpoint's pack
    assert all(pages[p].pack == entry.refs[0].pack for p in deltas)
    monkeypatch.undo()
    small_commits(con, 3, seed=7)
    commit(box)
    snap = box.db_snapshot()
    assert snap.deltas and snap.base == pages
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


# --------------------------------------------------------------------------- damage


def test_a_corrupt_base_page_is_reported_and_never_restored_silently(tmp_path):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 1500)
    commit(box)
    small_commits(con, 5, seed=8)
    commit(box)
    con.close()
    snap = box.db_snapshot()
    p = min(snap.deltas)
    base = snap.base[p]
    assert snap.pages[p].pack != base.pack
    pack = box.store_path / pack_key(base.pack)
    data = bytearray(pack.read_bytes())
    data[base.rec.offset + HEADER.size + (base.rec.length - HEADER.size) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))

    with pytest.raises(CorruptObject) as err:
        rebuild_db(box.entry(), box.repo(), str(tmp_path / "out.db"))
    assert f"@{base.rec.offset}" in err.value.key, "the error names the damaged base record"
    result = verify(box.repo(), full=True)
    bad = [f for f in result.findings if f.kind == BAD_SNAPSHOT]
    assert {f.manifest for f in bad} == {1, 2}, result.findings   # checkpoint 1 uses that page whole

    # restore falls back to checkpoint 1, which needs the same page: nothing is installed
    dest = tmp_path / "restored"
    res = restore(box.cfg, box.store, to=str(dest))
    assert not res.complete
    tree = next(t for t in res.trees if t.name == TREE)
    assert DB in tree.lost and not (dest / TREE / DB).exists()


def test_a_corrupt_delta_record_is_caught_by_its_hash(tmp_path):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 1500)
    commit(box)
    small_commits(con, 5, seed=9)
    commit(box)
    con.close()
    snap = box.db_snapshot()
    ref = snap.pages[max(snap.deltas)].rec
    pack = box.store_path / pack_key(ref.pack)
    data = bytearray(pack.read_bytes())
    data[ref.offset + ref.length - 3] ^= 0x01
    pack.write_bytes(bytes(data))
    with pytest.raises(CorruptObject):
        rebuild_db(box.entry(), box.repo(), str(tmp_path / "out.db"))
    assert [f.manifest for f in verify(box.repo(), full=True).findings if f.kind == BAD_SNAPSHOT] == [2]
    # restore falls back to checkpoint 1's snapshot, which does not need that record
    dest = tmp_path / "restored"
    res = restore(box.cfg, box.store, to=str(dest))
    tree = next(t for t in res.trees if t.name == TREE)
    assert tree.fallbacks and DB in " ".join(tree.fallbacks), tree
    assert len(rows(dest / TREE / DB)) == 1500


# --------------------------------------------------------------------------- gc


def test_gc_keeps_the_pack_of_base_pages_every_later_snapshot_replaced(tmp_path):
    """A tiny database whose every page changes: the newest snapshot reads no page of
    the first pack as such, but each of its deltas needs a base page from it."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = sqlite3.connect(box.db, isolation_level=None)
    con.execute("CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT)")
    con.executemany("INSERT INTO kv VALUES (?, ?)", [(i, f"value {i} " * 20) for i in range(60)])
    commit(box)
    for tick in range(2):
        con.execute("UPDATE kv SET v = v || ?", (f" t{tick}",))
        con.execute(f"PRAGMA user_version = {tick + 1}")   # page 1's header changes too
        commit(box)
    con.close()
    snap = box.db_snapshot()
    full_pack = box.entry(1).refs[0].pack
    assert full_pack in box.repo().load_manifest(1)[0].packs
    assert all(ref.pack != full_pack for ref in snap.pages), "every page was replaced"
    assert snap.deltas == set(range(len(snap.pages))) & snap.base.keys()

    repo = box.repo()
    before = set(repo.store.list("packs/"))
    for _ in range(2):          # mark, then sweep
        gc(repo, Policy(keep_last=1), 0.0)
    assert repo.manifest_seqs() == [3]
    assert (box.store_path / pack_key(full_pack)).exists()
    left = {k.rsplit("/", 1)[1] for k in repo.store.list("packs/")}
    # what checkpoint 3 needs: its own packs, its maps' packs (the cumulative map may be
    # checkpoint 2's), every final page's and every full-map page's; nothing else stays
    entry = box.entry(3)
    needed = {full_pack, *repo.load_manifest(3)[0].packs, *(r.pack for r in entry.refs),
              *(loc.pack for loc in snap.pages), *(loc.pack for loc in snap.base.values())}
    assert left == needed and len(left) < len(before), "checkpoint 1's index pack was swept"
    assert verify(repo, full=True).ok
    out = rebuilt(box, tmp_path)
    assert [r[0] for r in sqlite3.connect(out).execute("SELECT count(*) FROM kv")] == [60]


# --------------------------------------------------------------------------- the local base copy


def get_packs(store: FaultyStore) -> list[str]:
    return [k for m, k in store.calls if m == "get" and k.startswith("packs/")]


def test_the_base_copy_spares_store_reads_and_a_fresh_container_rebuilds_it(tmp_path):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 2000)
    commit(box)
    copy = base_copy(box)
    assert copy.exists() and copy.read_bytes() == copy_of(box.db, tmp_path).read_bytes()
    assert not os.listdir(box.local / ".journal" / "sqlite-staging")

    small_commits(con, 5, seed=10)
    store = FaultyStore(box.store)
    commit(box, store)
    assert get_packs(store) == [], "base pages come from the local copy"
    assert box.db_snapshot().deltas
    expected = rows(box.db)

    # a fresh container (no base copy, no map cache): bases come from the store, once
    shutil.rmtree(box.local / ".journal" / BASE_DIR)
    shutil.rmtree(box.local / ".journal" / "maps")
    small_commits(con, 5, seed=11)
    store = FaultyStore(box.store)
    commit(box, store)
    assert get_packs(store), "without a copy, base pages are read from the store"
    snap = box.db_snapshot()
    assert snap.deltas and copy.exists()
    small_commits(con, 5, seed=12)
    store = FaultyStore(box.store)
    commit(box, store)
    reads = get_packs(store)
    assert len(reads) < len(box.db_snapshot().deltas), "the copy now holds the bases used so far"
    assert rows(rebuilt(box, tmp_path)) == rows(box.db) != expected
    con.close()


def count_page_hashes(monkeypatch, page_size: int = 4096) -> list[int]:
    """Count the page-sized payloads the codec hashes from now on (one item each)."""
    hashed: list[int] = []
    plain_id = Codec.id

    def counting(self, data):
        if len(data) == page_size:
            hashed.append(1)
        return plain_id(self, data)

    monkeypatch.setattr(Codec, "id", counting)
    return hashed


def test_a_delta_tick_hashes_only_the_pages_that_differ_from_the_base_copy(tmp_path, monkeypatch):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 2000)
    commit(box)
    pages = len(db_pages(copy_of(box.db, tmp_path)))
    small_commits(con, 5, seed=20)
    hashed = count_page_hashes(monkeypatch)
    commit(box)
    changed = len(box.db_snapshot().deltas)
    assert 0 < changed <= len(hashed) <= 2 * changed < pages // 4, (len(hashed), changed, pages)
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


@pytest.mark.parametrize("spoil", ["replaced copy", "rewritten in place", "another boot", "no record",
                                   "a record nested deep", "a field nested deep", "a bool for a page"])
def test_a_base_copy_not_known_to_be_the_full_maps_makes_every_page_hashed(tmp_path, monkeypatch, spoil):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 2000)
    commit(box)
    copy = base_copy(box)
    pages = len(db_pages(copy))
    if spoil == "replaced copy":  # the same bytes in another file: the record names the old one
        shutil.copyfile(copy, tmp_path / "other.db")
        os.replace(tmp_path / "other.db", copy)
    elif spoil == "rewritten in place":  # the same inode, written by something else
        data = copy.read_bytes()
        with open(copy, "r+b") as fh:
            fh.write(data)
    elif spoil == "another boot":  # the copy was written without fsync before a restart
        boot = tmp_path / "boot_id"
        boot.write_text("another boot\n")
        monkeypatch.setattr(base_copy_mod, "BOOT_ID", str(boot))
    elif spoil == "no record":
        os.unlink(str(copy) + SAME_SUFFIX)
    else:  # a record written by something else: never a crash of every later checkpoint
        record = Path(str(copy) + SAME_SUFFIX)
        rec = json.loads(record.read_bytes())
        if spoil == "a record nested deep":
            record.write_bytes(b"[" * 200_000)
        elif spoil == "a field nested deep":
            record.write_bytes(b'{"x": ' + b"[" * 200_000 + b"]" * 200_000 + b", " + json.dumps(rec)[1:].encode())
        else:
            record.write_text(json.dumps({**rec, "differs": [True]}))
    small_commits(con, 5, seed=21)
    hashed = count_page_hashes(monkeypatch)
    commit(box)
    assert len(hashed) >= pages
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


def test_base_pages_repaired_from_the_store_keep_the_copy_trusted(tmp_path, monkeypatch):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 2000)
    commit(box)
    copy = base_copy(box)
    record = Path(str(copy) + SAME_SUFFIX)
    # rot the record cannot see: every page of the copy damaged, its stamp kept
    data = bytearray(copy.read_bytes())
    for at in range(100, len(data), 4096):
        data[at] ^= 0x5A
    with open(copy, "r+b") as fh:
        fh.write(data)
    rec = json.loads(record.read_bytes())
    rec["file"] = base_copy_mod._stamp(str(copy))   # forged: the copy's stamp as it is now
    record.write_text(json.dumps(rec))
    assert base_copy_mod.same_pages(str(box.state_dir), box.entry().refs[0].id) is not None
    small_commits(con, 5, seed=24)
    store = FaultyStore(box.store)
    commit(box, store)
    assert get_packs(store), "the damaged bases came from the store"
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    # the repairs re-stamped the record (the copy is still trusted); the pages still
    # damaged differ from the live ones, so they are hashed, and the snapshot stays right
    same = base_copy_mod.same_pages(str(box.state_dir), box.entry().refs[0].id)
    assert same is not None and same.differs == []
    small_commits(con, 5, seed=25)
    hashed = count_page_hashes(monkeypatch)
    commit(box)
    assert hashed
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


def test_a_copy_kept_by_a_fresh_container_is_trusted_except_where_it_differs(tmp_path, monkeypatch):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 2000)
    commit(box)
    full_pages = len(db_pages(base_copy(box)))
    shutil.rmtree(box.local / ".journal" / BASE_DIR)
    # a new table grows the file past the full map: those pages differ from it
    con.execute("CREATE TABLE extra(x TEXT)")
    con.executemany("INSERT INTO extra VALUES (?)", [("x" * 500,) for _ in range(80)])
    small_commits(con, 5, seed=22)
    commit(box)
    copy = base_copy(box)
    differs = json.loads(Path(str(copy) + SAME_SUFFIX).read_bytes())["differs"]
    pages = len(db_pages(copy))
    assert differs == list(range(full_pages, pages))
    small_commits(con, 5, seed=23)
    hashed = count_page_hashes(monkeypatch)
    commit(box)
    assert len(differs) <= len(hashed) < pages // 2
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


def test_a_damaged_base_copy_is_repaired_from_the_store_and_deltas_stay_right(tmp_path):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 2000)
    commit(box)
    copy = base_copy(box)
    data = bytearray(copy.read_bytes())
    for i in range(0, len(data), 997):
        data[i] ^= 0x5A
    copy.write_bytes(bytes(data))
    small_commits(con, 6, seed=13)
    store = FaultyStore(box.store)
    commit(box, store)
    assert get_packs(store)
    snap = box.db_snapshot()
    assert snap.deltas
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    repaired = db_pages(copy)
    for p in snap.deltas & snap.base.keys():
        assert hashlib.sha256(repaired[p]).hexdigest() == snap.base[p].id
    con.close()


def test_a_base_page_the_store_cannot_serve_costs_only_its_own_delta(tmp_path):
    """No base copy, and one base page is corrupt in the store: that page goes in whole,
    the others as deltas, and the new snapshot does not need the damaged page."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 1500)
    commit(box)
    shutil.rmtree(box.local / ".journal" / BASE_DIR)
    small_commits(con, 4, seed=14)
    live = copy_of(box.db, tmp_path)
    first = box.db_snapshot()
    pages = db_pages(live)
    changed = [p for p in range(len(first.pages)) if hashlib.sha256(pages[p]).hexdigest() != first.pages[p].id]
    victim = first.base[changed[0]].rec  # a whole group: every changed page it holds loses its base
    lost = {p for p in changed if first.base[p].rec == victim}
    assert set(changed) - lost, "some changed pages have their base in another group"
    pack = box.store_path / pack_key(victim.pack)
    good = pack.read_bytes()
    data = bytearray(good)
    data[victim.offset + victim.length - 2] ^= 0xFF
    pack.write_bytes(bytes(data))
    commit(box)
    snap = box.db_snapshot()
    for p in lost:  # stored whole: their new copies need nothing from the damaged group
        assert p not in snap.deltas and not is_delta(record(box, snap.pages[p]))
        assert snap.pages[p].rec != victim
    assert (set(changed) - lost) & snap.deltas
    # the group's unchanged pages are still the snapshot's, so a rebuild needs it whole again
    with pytest.raises(CorruptObject):
        rebuilt(box, tmp_path)
    pack.write_bytes(good)
    assert rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


def test_a_store_outage_while_reading_base_pages_fails_the_checkpoint(tmp_path):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 1500)
    commit(box)
    shutil.rmtree(box.local / ".journal" / BASE_DIR)
    small_commits(con, 4, seed=18)
    down = FaultyStore(box.store, fail_when=lambda m, k: m == "get" and k.startswith("packs/"))
    with pytest.raises(StoreError):
        checkpoint(box.cfg, down)
    assert box.repo().manifest_seqs() == [1]
    commit(box)
    assert box.db_snapshot().deltas and rows(rebuilt(box, tmp_path)) == rows(box.db)
    con.close()


def test_quick_verify_reports_a_missing_pack_of_snapshot_pages(tmp_path, monkeypatch):
    """A new full map reuses whole pages from older packs; a later delta's bases live
    there too. Quick verify reads the maps and names the missing pack."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 1500)
    commit(box)
    first_pack = box.entry().refs[0].pack
    small_commits(con, 4, seed=15)
    commit(box)
    monkeypatch.setattr(sqlite_capture, "DELTA_MIN", 0)
    monkeypatch.setattr(sqlite_capture, "DELTA_SHARE", 10**9)
    small_commits(con, 1, seed=16)
    commit(box)
    monkeypatch.undo()
    small_commits(con, 4, seed=17)
    commit(box)
    con.close()
    snap = box.db_snapshot()
    assert snap.deltas and {r.pack for r in box.entry().refs}.isdisjoint({first_pack})
    assert any(snap.base[p].pack == first_pack for p in range(len(snap.base)))
    assert verify(box.repo()).ok
    os.unlink(box.store_path / pack_key(first_pack))
    findings = [f for f in verify(box.repo()).findings if f.manifest == 4]
    assert [(f.kind, f.key) for f in findings] == [("missing-object", pack_key(first_pack))]
    assert DB in findings[0].detail


def test_base_copies_are_named_by_full_map_and_replaced_with_it(tmp_path, monkeypatch):
    box = OpencodeLive(tmp_path, tmp_path / "store")
    con = fill(box.db, 300)
    other = box.local / "opencode-share" / "opencode-old.db"
    fill(other, 300, seed=2).close()
    commit(box)
    state = str(box.local / ".journal")
    folder = box.local / ".journal" / BASE_DIR
    entries = ManifestCache(box.repo()).tree(1, TREE)[0]
    ids = {e.path: e.refs[0].id for e in entries}
    assert sorted(os.listdir(folder)) == copies(ids.values())
    # a new full map replaces its database's copy; the other database's copy stays
    monkeypatch.setattr(sqlite_capture, "DELTA_MIN", 0)
    monkeypatch.setattr(sqlite_capture, "DELTA_SHARE", 10**9)
    small_commits(con, 1, seed=3)
    commit(box)
    new_id = box.entry().refs[0].id
    assert new_id != ids[DB]
    assert sorted(os.listdir(folder)) == copies([new_id, ids['opencode-old.db']])
    assert base_copy(box).read_bytes() == copy_of(box.db, tmp_path).read_bytes()
    # a database no longer checkpointed: its copy goes when the checkpoint prunes
    assert prune_base_copies(state, [new_id]) == 1
    assert sorted(os.listdir(folder)) == copies([new_id])
    assert prune_base_copies(state, [new_id]) == 0
    con.close()


# --------------------------------------------------------------------------- format rules


def test_the_delta_flag_is_refused_on_any_other_kind_and_maps_that_break_the_rules():
    page, base = b"a" * 3000 + b"b" * 1096, b"a" * 4096
    pid, data = encode_record(KIND_DBPAGE, page, base=base)
    assert decode_record(data, key="t", expect_id=pid, base=base) == page
    forged = data[:5] + bytes([KIND_MANIFEST]) + data[6:]   # a manifest is never a delta
    assert forged[:4] == MAGIC
    with pytest.raises(CorruptObject, match="unknown flags"):
        decode_record(forged, key="t", base=base)
    with pytest.raises(ValueError):
        encode_record(KIND_MANIFEST, page, base=base)

    # a group delta names its members; only a dbpage delta may, and only a delta
    members = struct.pack(">2I", 4, 9)
    gid, gdata = encode_record(KIND_DBPAGE, page + page, base=base, names=Members(members))
    assert embedded_members(gdata, key="t") == [4, 9]
    assert decode_record(gdata, key="t", expect_id=gid, base=base) == page + page
    with pytest.raises(ValueError):
        encode_record(KIND_DBPAGE, page, names=Members(members))
    with pytest.raises(ValueError):
        encode_record(KIND_PAGE, page, base=base, names=Members(members))
    no_delta = bytearray(gdata)
    no_delta[6:8] = FLAG_MEMBERS.to_bytes(2, "big")  # members without the delta flag
    with pytest.raises(CorruptObject, match="unknown flags"):
        decode_record(bytes(no_delta), key="t", base=base)

    whole = BlobRef(hashlib.sha256(b"w").hexdigest(), "", 0, 100, 2 * 4096)
    group = BlobRef(hashlib.sha256(b"g").hexdigest(), "", 100, 100, 4096)
    pid_of = {p: hashlib.sha256(bytes([p])).hexdigest() for p in range(3)}
    pages = {0: PageLoc(pid_of[0], whole, 0), 1: PageLoc(pid_of[1], whole, 1), 2: PageLoc(pid_of[2], group, 0, True)}
    with pytest.raises(ValueError):
        encode_map(True, 4096, 3, pages, lambda r: "")      # a full map holds no delta record
    good = encode_map(False, 4096, 3, pages, lambda r: "")
    pm, decoded = decode_map(good, "pack", "t")
    assert pm.version == 3 and len(decoded) == 3 and decoded[2].delta and decoded[1].slot == 1
    assert decoded[0].rec == decoded[1].rec and decoded[0].rec.pack == "pack"

    def forge(**changes) -> bytes:
        return msgspec.msgpack.encode(msgspec.structs.replace(pm, **changes))

    slots = bytearray(pm.slots)
    slots[8:12] = (5).to_bytes(4, "big")                    # page 0 in slot 5 of a 2-page record
    twice = pm.slots + pm.slots[:SLOT.size]                 # page 0 listed twice
    for bad in (forge(full=True), forge(version=4), forge(slots=bytes(slots)), forge(slots=twice),
                forge(slots=pm.slots[:-1]), forge(records=pm.records[:-1]), forge(deltas=b"\0\0\0\0"),
                forge(records=pm.records[:GROUP.size])):
        with pytest.raises(CorruptObject):
            decode_map(bad, "pack", "t")


def test_a_base_copy_written_in_place_with_its_mtime_put_back_is_not_trusted(tmp_path):
    """The base copy's record names the file by device, inode, size, mtime and ctime:
    pages written into it in place by anything else, its mtime then set back with
    ``utime``, once passed as untouched (the live page equal to the forged one took the
    full map's id). The ctime cannot be set back."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    fill(box.db, 2000)
    commit(box)
    copy = base_copy(box)
    full_id = box.entry().refs[0].id
    assert base_copy_mod.same_pages(str(box.state_dir), full_id) is not None
    st = copy.stat()
    with open(copy, "r+b") as fh:
        fh.seek(5 * 4096 + 100)
        fh.write(b"forged")
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (copy.stat().st_size, copy.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert base_copy_mod.same_pages(str(box.state_dir), full_id) is None


def test_a_base_page_is_never_written_past_the_copys_end(tmp_path):
    """A copy kept from a database that had shrunk is shorter than its full map. A base
    page read from the store for a page past its end was written there, leaving a hole
    of zeros before it that the record then called the full map's: a live all-zero page
    in the hole took the full map's id (a checkpoint recorded wrong page ids, and its
    restore failed or fell back). The copy is never extended past its end."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    fill(box.db, 3000)
    commit(box)
    copy = base_copy(box)
    snap = box.db_snapshot()
    full_id = box.entry().refs[0].id
    keep = 4
    with open(copy, "r+b") as fh:
        fh.truncate(keep * snap.page_size)
    base_copy_mod._mark_same(str(copy), ())   # trusted, and shorter than its full map
    far = len(snap.pages) - 1
    bases = base_copy_mod.BaseCopy(str(box.state_dir), full_id, snap.page_size, box.repo(), PLAIN)
    got = bases.read([(far, snap.base[far]), (keep, snap.base[keep])])
    assert set(got) == {far, keep}, "both come from the store, verified"
    assert copy.stat().st_size == (keep + 1) * snap.page_size, "the page at the end is written; the far one is not"
    same = base_copy_mod.same_pages(str(box.state_dir), full_id)
    assert same is not None and same.differs == []   # and every page it holds is the full map's
    assert copy.read_bytes()[keep * snap.page_size:] == got[keep]
