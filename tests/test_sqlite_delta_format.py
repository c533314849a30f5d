"""SQLite snapshots on disk, pinned by three golden stores (docs/design.md §7, §18).

``tests/golden/sqlite-v1`` was written by the format-1 writer (every page stored
whole, page maps version 1), ``tests/golden/sqlite-v2`` by the format-2 writer
(changed pages stored as one-page deltas, delta maps version 2) and
``tests/golden/sqlite-v3`` by the format-5 writer (page groups, group deltas, maps
version 3); all three are frozen: they pin that old stores still read.
``tests/golden/sqlite-v4`` is written by ``tools/make_golden.py --sqlite`` (format 6:
index page and page map deltas naming their base by position). Each holds one
database checkpointed three times (v4: four); ``expect.json`` gives the SHA-256, page
count and a row digest of each snapshot.

A reader written from the documented format (records decoded by
``tests/helpers/format_reader.py``; struct, zstandard, msgpack; no journal imports)
rebuilds every snapshot; journal's own restore and verify must
agree with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import struct
import sys

import msgspec
import pytest

from conftest import golden_cli
from helpers.format_reader import (FLAG_BASE_AT, FLAG_DELTA, FLAG_MEMBERS, HEADER, KIND_DBPAGE, KIND_MANIFEST,
                                   KIND_PAGE, KIND_PAGEMAP, StoreFiles, decode_record)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
VERSIONS = ("v1", "v2", "v3", "v4")
GOLDEN = {v: os.path.join(HERE, "golden", f"sqlite-{v}") for v in VERSIONS}

MAP_RECORD = struct.Struct(">IHQI32s")     # maps v1-v2: one record per page
MAP_GROUP = struct.Struct(">HQIIB32s")     # maps v3: pack index, offset, length, pages, flags, record id
MAP_SLOT = struct.Struct(">III32s")        # maps v3: pgno, record index, slot, page id
SAME_PACK = 0xFFFF


# --- an independent reader of the documented format ---------------------------------

class Reader(StoreFiles):
    def __init__(self, root: str):
        super().__init__(root)
        self.flags_seen: dict[int, set[int]] = {}     # kind -> flags seen

    def record(self, data: bytes, expect_id: str | None = None, base: bytes | None = None) -> tuple[int, int, bytes]:
        head, payload = decode_record(data, base)
        kind, flags = head["kind"], head["flags"]
        allowed = {KIND_DBPAGE: (0, FLAG_DELTA, FLAG_DELTA | FLAG_MEMBERS),
                   KIND_PAGE: (0, FLAG_DELTA | FLAG_BASE_AT), KIND_PAGEMAP: (0, FLAG_DELTA | FLAG_BASE_AT)}
        assert flags in allowed.get(kind, (0,))
        self.flags_seen.setdefault(kind, set()).add(flags)
        if flags & FLAG_BASE_AT:  # the base, by position: a whole record of the same kind
            base_kind, base_flags, base = self.record(self.stored(head["base_ref"]))
            assert base_kind == kind and base_flags == 0, "a delta's base is a whole record of its kind"
            head, payload = decode_record(data, base)
        assert payload is not None, "a page delta needs its base page"
        assert expect_id is None or head["sha256"] == expect_id
        return kind, flags, payload

    def blob(self, ref: list, parent_pack: str = "", base: bytes | None = None) -> tuple[int, int, bytes]:
        return self.record(self.stored(ref, parent_pack), ref[0], base)

    def manifest(self, seq: int) -> dict:
        kind, _, payload = self.record(self.raw(f"manifests/{seq:012d}"))
        assert kind == KIND_MANIFEST
        return json.loads(payload)

    def entries(self, root: list) -> list[dict]:
        out, stack = [], [root]
        while stack:
            ref = stack.pop()
            kind, _, payload = self.blob(ref)
            assert kind == KIND_PAGE
            page = json.loads(payload)
            out.extend(page["entries"])
            stack.extend([c[1][0], c[1][1] or ref[1], *c[1][2:]] for c in page["children"])
        return out

    def page_map(self, ref: list) -> dict:
        kind, _, payload = self.blob(ref)
        assert kind == KIND_PAGEMAP
        pm = msgspec.msgpack.decode(payload)
        # pages: pgno -> [record ref, slot, page id]; deltas: pgnos whose record is a delta
        pages, deltas = {}, []
        if pm["version"] == 3:
            recs = []
            for idx, offset, length, npages, flags, digest in MAP_GROUP.iter_unpack(pm["records"]):
                pack = ref[1] if idx == SAME_PACK else pm["packs"][idx]
                recs.append(([digest.hex(), pack, offset, length, npages * pm["page_size"]], flags))
            for pgno, idx, slot, digest in MAP_SLOT.iter_unpack(pm["slots"]):
                rec, flags = recs[idx]
                assert slot < rec[4] // pm["page_size"]
                pages[pgno] = [rec, slot, digest.hex()]
                if flags & 1:
                    deltas.append(pgno)
            assert "deltas" not in pm
        else:
            assert pm["version"] in (1, 2) and len(pm["records"]) % MAP_RECORD.size == 0
            for pgno, idx, offset, length, digest in MAP_RECORD.iter_unpack(pm["records"]):
                pack = ref[1] if idx == SAME_PACK else pm["packs"][idx]
                pages[pgno] = [[digest.hex(), pack, offset, length, pm["page_size"]], 0, digest.hex()]
            deltas = [p for (p,) in struct.iter_unpack(">I", pm.get("deltas", b""))]
            if pm["version"] == 1:
                assert "deltas" not in pm
        assert not (deltas and pm["full"]), "a full map lists whole pages only"
        return {"full": pm["full"], "version": pm["version"], "page_size": pm["page_size"],
                "count": pm["page_count"], "pages": pages, "deltas": deltas}

    def snapshot(self, entry: dict) -> tuple[bytes, dict]:
        """The database bytes of one sqlite entry, and what its maps said."""
        maps = [self.page_map(r) for r in entry["refs"]]
        full = maps[0]
        assert full["full"] and len(maps) <= 3 and sorted(full["pages"]) == list(range(full["count"]))
        assert not full["deltas"]
        pages, count, deltas = dict(full["pages"]), full["count"], set()
        for later in maps[1:]:  # delta maps, applied in order
            assert not later["full"]
            pages.update(later["pages"])
            count = later["count"]
            deltas = (deltas - later["pages"].keys()) | set(later["deltas"])
        size = full["page_size"]

        def page_of(loc) -> tuple[int, bytes]:
            rec, slot, page_id = loc
            data = self.stored(rec)
            flags = HEADER.unpack_from(data)[3]
            base = None
            if flags & FLAG_MEMBERS:  # format 5: the full map's pages of its members, back to back
                members = decode_record(data)[0]["members"]
                base = b"".join(page_of(full["pages"][m])[1] for m in members if m in full["pages"])
            elif flags & FLAG_DELTA:  # format 2: the full map's page of the same number
                base = page_of(full["pages"][pgno])[1]
            kind, flags, payload = self.record(data, rec[0], base)
            assert kind == KIND_DBPAGE
            page = payload[slot * size:(slot + 1) * size]
            assert hashlib.sha256(page).hexdigest() == page_id
            return flags, page

        out, forms = bytearray(), []
        for pgno in range(count):
            flags, page = page_of(pages[pgno])
            assert bool(flags & FLAG_DELTA) == (pgno in deltas)
            out += page
            forms.append((pages[pgno][2], flags))
        return bytes(out), {"maps": [(m["full"], m["version"], m["count"], sorted(m["deltas"])) for m in maps],
                            "pages": forms}


def load_expect(version: str) -> dict:
    with open(os.path.join(GOLDEN[version], "expect.json")) as fh:
        return json.load(fh)


def rows_digest(path: str) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = con.execute("SELECT id, title, body FROM notes ORDER BY id").fetchall()
    finally:
        con.close()
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def golden_snapshots(version: str, root: str | None = None) -> dict[int, tuple[bytes, dict]]:
    expect = load_expect(version)
    reader = Reader(root or os.path.join(GOLDEN[version], "store"))
    out = {}
    for seq in sorted(map(int, expect["checkpoints"])):
        man = reader.manifest(seq)
        entries = reader.entries(man["trees"][expect["tree"]]["root"])
        entry = next(e for e in entries if e["path"] == expect["db"])
        assert entry["kind"] == "sqlite"
        out[seq] = reader.snapshot(entry)
    out[0] = (b"", {"flags": reader.flags_seen})
    return out


# --- the tests -----------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_documented_reader_rebuilds_every_golden_snapshot(tmp_path, version):
    expect = load_expect(version)
    snaps = golden_snapshots(version)
    for seq, want in expect["checkpoints"].items():
        data, _ = snaps[int(seq)]
        assert (hashlib.sha256(data).hexdigest(), len(data), len(data) // 1024) == (
            want["sha256"], want["size"], want["pages"]), seq
        path = tmp_path / f"{version}-{seq}.db"
        path.write_bytes(data)
        assert rows_digest(str(path)) == want["rows"]


def test_v1_store_holds_whole_pages_and_v2_store_holds_page_deltas():
    v1, v2 = golden_snapshots("v1"), golden_snapshots("v2")
    assert v1[0][1]["flags"][KIND_DBPAGE] == {0}
    assert v2[0][1]["flags"][KIND_DBPAGE] == {0, FLAG_DELTA}
    for seq in (1, 2, 3):
        assert v1[seq][0] == v2[seq][0], "both formats describe the same databases"
    assert [m[:2] for m in v1[1][1]["maps"]] == [m[:2] for m in v2[1][1]["maps"]] == [(True, 1)]
    for seq in (2, 3):
        (full1, delta1), (full2, delta2) = v1[seq][1]["maps"], v2[seq][1]["maps"]
        assert full1 == full2 == (True, 1, 13, [])
        assert delta1[:2] == (False, 1) and delta1[3] == []
        assert delta2[:2] == (False, 2) and delta2[3], "changed pages are stored as page deltas"
        assert all(p < 13 for p in delta2[3]), "only a page with a base in the full map is a delta"
    # pages that did not exist in the full map are whole
    assert 13 not in v2[2][1]["maps"][1][3] and not set(range(13, 19)) & set(v2[3][1]["maps"][1][3])


def test_v3_store_holds_page_groups_and_group_deltas():
    v1, v3 = golden_snapshots("v1"), golden_snapshots("v3")
    assert v3[0][1]["flags"][KIND_DBPAGE] == {0, FLAG_DELTA | FLAG_MEMBERS}
    for seq in (1, 2, 3):
        assert v1[seq][0] == v3[seq][0], "both formats describe the same databases"
    assert [m[:2] for m in v3[1][1]["maps"]] == [(True, 3)]
    for seq in (2, 3):
        full, *deltas = v3[seq][1]["maps"]
        assert full == (True, 3, 13, []) and all(d[:2] == (False, 3) for d in deltas)
        assert any(d[3] for d in deltas), "changed pages are stored in group deltas"
    reader = Reader(os.path.join(GOLDEN["v3"], "store"))
    expect = load_expect("v3")
    man = reader.manifest(1)
    entry = next(e for e in reader.entries(man["trees"][expect["tree"]]["root"]) if e["path"] == expect["db"])
    records = {tuple(loc[0]) for loc in reader.page_map(entry["refs"][0])["pages"].values()}
    assert len(records) == 1, "the full map's 13 pages are one whole group"


@pytest.mark.parametrize("version", VERSIONS)
def test_restore_at_each_golden_checkpoint_rebuilds_the_same_bytes(tmp_path, version):
    store = tmp_path / "store"
    shutil.copytree(os.path.join(GOLDEN[version], "store"), store)
    expect = load_expect(version)
    for seq, want in expect["checkpoints"].items():
        out = tmp_path / f"out-{seq}"
        proc = golden_cli(tmp_path, store).run("restore", "--at", seq, "--to", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        path = out / expect["tree"] / expect["db"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == want["sha256"], seq
        assert rows_digest(str(path)) == want["rows"]


@pytest.mark.parametrize("version", VERSIONS)
def test_verify_full_on_golden_sqlite_store_is_clean(tmp_path, version):
    store = tmp_path / "store"
    shutil.copytree(os.path.join(GOLDEN[version], "store"), store)
    proc = golden_cli(tmp_path, store).run("verify", "--full", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is True and result["manifests"] == len(load_expect(version)["checkpoints"])


def test_current_writer_reproduces_the_v4_golden_store(tmp_path):
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from tools.make_golden import build_golden_sqlite

    store_dir, expect = build_golden_sqlite(str(tmp_path / "work"))
    golden = load_expect("v4")
    assert expect["checkpoints"] == golden["checkpoints"] or expect["sqlite_version"] != golden["sqlite_version"]
    if expect["sqlite_version"] != golden["sqlite_version"]:
        pytest.skip(f"SQLite {expect['sqlite_version']} writes other database bytes than "
                    f"{golden['sqlite_version']}, which wrote the golden store")
    # compared as the format means it (maps, page ids, record kinds and flags), not as
    # frame bytes, so a zstd upgrade is not mistaken for a format change
    built, golden_view = golden_snapshots("v4", store_dir), golden_snapshots("v4")
    assert built == golden_view, (
        "the current code writes a different SQLite format than tests/golden/sqlite-v4; if that is "
        "deliberate, regenerate it with tools/make_golden.py --sqlite and add a format version")


def test_v3_maps_decode_and_reencode_byte_for_byte_and_old_maps_are_never_written():
    """journal's own map codec agrees with the golden v3 maps (formats 5 and 6) byte for
    byte; it reads v1 and v2 maps but writes only v3."""
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from journal.format.pagemap import MAP_VERSION, decode_map, encode_map

    assert MAP_VERSION == 3
    seen = 0
    for version in VERSIONS:
        reader = Reader(os.path.join(GOLDEN[version], "store"))
        expect = load_expect(version)
        for seq in expect["checkpoints"]:
            man = reader.manifest(int(seq))
            entry = next(e for e in reader.entries(man["trees"][expect["tree"]]["root"]) if e["path"] == expect["db"])
            for ref in entry["refs"]:
                payload = reader.blob(ref)[2]
                pm, pages = decode_map(payload, ref[1], "golden")
                again = encode_map(pm.full, pm.page_size, pm.page_count, pages,
                                   lambda r, own=ref[1]: "" if r.pack == own else r.pack)
                assert (again == payload) == (version in ("v3", "v4")), (version, seq)
                assert decode_map(again, ref[1], "again")[1] == {p: loc._replace(legacy=False)
                                                                 for p, loc in pages.items()}
                seen += version in ("v3", "v4")
    assert seen == 15  # v3: 1 + 2 + 3 maps; v4: the same, then a full, a cumulative and a recent one


def test_v4_store_names_delta_bases_by_position():
    """Format 6: the index pages of checkpoints 2-4 and the recent map of checkpoint 4
    are deltas naming their base by position; the databases are the v3 store's."""
    v3, v4 = golden_snapshots("v3"), golden_snapshots("v4")
    for seq in (1, 2, 3):
        assert v3[seq][0] == v4[seq][0], "both formats describe the same databases"
    flags = v4[0][1]["flags"]
    assert flags[KIND_PAGE] == {0, FLAG_DELTA | FLAG_BASE_AT}
    assert flags[KIND_PAGEMAP] == {0, FLAG_DELTA | FLAG_BASE_AT}
    assert FLAG_BASE_AT not in set().union(*v3[0][1]["flags"].values())
    reader = Reader(os.path.join(GOLDEN["v4"], "store"))
    expect = load_expect("v4")
    man = reader.manifest(4)
    entry = next(e for e in reader.entries(man["trees"][expect["tree"]]["root"]) if e["path"] == expect["db"])
    forms = [HEADER.unpack_from(reader.stored(ref))[3] for ref in entry["refs"]]
    assert forms == [0, 0, FLAG_DELTA | FLAG_BASE_AT]
