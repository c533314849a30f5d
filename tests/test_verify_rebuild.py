"""``verify --full`` rebuilds a history of snapshots from each other
(``journal/sqlite/rebuild_chain.py``): each full map's records are read once, each
snapshot writes only the pages it does not share with the one before, and every
snapshot is still rebuilt byte for byte and integrity-checked, so damage in any of
them is still found."""

from __future__ import annotations

from collections import Counter

import pytest

from helpers.container import OpencodeLive
from journal.errors import CorruptObject
from journal.repository.repository import Repository, pack_key
from journal.sqlite.rebuild import rebuild_db
from journal.store import open_store
from journal.verify import BAD_SNAPSHOT, verify
from test_gc import CountingStore
from test_verify_shared import database_ticks


def history(tmp_path, ticks: int) -> tuple[OpencodeLive, dict]:
    """A database checkpointed ``ticks`` + 1 times, a row added and one changed each
    time: every snapshot over the first one's full map. ``(box, seq -> snapshot)``."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    # random text: its pages compress to a pack larger than verify reads whole
    database_ticks(box, ticks, row=lambda rng: f"{rng.getrandbits(2048):0512x}")
    snaps = {seq: box.db_snapshot(seq) for seq in box.seqs()}
    assert len({box.entry(seq).refs[0] for seq in snaps}) == 1
    return box, snaps


def records(locs) -> set:
    return {(loc.rec.pack, loc.rec.offset) for loc in locs}


def test_each_snapshot_is_rebuilt_byte_for_byte_from_the_one_before_each_record_read_once(tmp_path):
    """Seven snapshots over one full map: the full map's records were read and decoded
    again for every snapshot, and every page written again."""
    from journal.sqlite.rebuild_chain import ChainRebuild

    box, snaps = history(tmp_path, 6)
    repo, work = box.repo(), tmp_path / "chain"
    work.mkdir()

    with ChainRebuild(repo, str(work)) as chain:
        for seq in sorted(snaps):
            chain.rebuild(box.entry(seq))
            alone = tmp_path / f"alone-{seq}.db"
            rebuild_db(box.entry(seq), repo, str(alone), strict=True)
            assert (work / "snapshot.db").read_bytes() == alone.read_bytes(), seq

    base = snaps[min(snaps)].base
    deltas = set().union(*(records(loc for p, loc in enumerate(s.pages) if base.get(p) != loc)
                           for s in snaps.values()))
    first = len(snaps[min(snaps)].pages)
    assert chain.bases == 1
    assert chain.records == len(records(base.values())) + len(deltas), (chain.records, len(deltas))
    assert first <= chain.pages < first + 6 * 20, chain.pages   # a few pages a tick after the first


def test_verify_full_reads_a_full_map_s_records_once_for_all_its_snapshots(tmp_path):
    """Six snapshots over one full map, whose pack is too large to be read whole: its
    database pages were read again for every snapshot."""
    box, snaps = history(tmp_path, 5)
    base = snaps[min(snaps)].base
    (full_pack,) = {loc.pack for loc in base.values()}
    pages_end = max(loc.rec.offset + loc.rec.length for loc in base.values())
    store = CountingStore(open_store(str(box.store_path)))

    result = verify(Repository.open(store), full=True)

    size = box.pack_file(full_pack).stat().st_size
    reads = Counter((start, end) for key, start, end in store.gets
                    if key == pack_key(full_pack) and start < pages_end and (start, end) != (0, size))
    assert result.ok, result.findings
    assert reads and max(reads.values()) == 1, reads   # not counting the read that hashes the pack
    assert result.snapshots == len(snaps) == 6


def test_a_damaged_delta_record_fails_each_snapshot_that_needs_it_and_no_other(tmp_path):
    """A record first needed in the middle of the history: the snapshots before it
    still pass, and a rebuild after a failed one starts again from the full map."""
    box, snaps = history(tmp_path, 6)
    seqs = sorted(snaps)
    base = snaps[seqs[0]].base
    needed = {seq: records(loc for p, loc in enumerate(snaps[seq].pages) if base.get(p) != loc) for seq in seqs}
    pick = min(needed[seqs[3]] - needed[seqs[2]])
    users = {seq for seq in seqs if pick in needed[seq]}
    box.corrupt_blob(next(loc.rec for loc in snaps[seqs[3]].pages if (loc.rec.pack, loc.rec.offset) == pick))

    result = verify(box.repo(), full=True)

    assert {f.manifest for f in result.findings if f.kind == BAD_SNAPSHOT} == users, result.findings
    assert seqs[3] in users and seqs[2] not in users
    assert result.snapshots == len(seqs)
    from journal.sqlite.rebuild_chain import ChainRebuild

    repo, work = box.repo(), tmp_path / "chain"
    work.mkdir()
    with ChainRebuild(repo, str(work)) as chain:
        with pytest.raises(CorruptObject):
            chain.rebuild(box.entry(seqs[3]))
        chain.rebuild(box.entry(seqs[2]))
    rebuild_db(box.entry(seqs[2]), repo, str(tmp_path / "alone.db"), strict=True)
    assert (work / "snapshot.db").read_bytes() == (tmp_path / "alone.db").read_bytes()


def test_a_damaged_full_map_page_fails_every_snapshot_over_that_map(tmp_path):
    box, snaps = history(tmp_path, 4)
    base = snaps[min(snaps)].base
    # a page the last snapshot no longer takes from the full map: every snapshot still needs it
    pgno = next(p for p, loc in enumerate(snaps[max(snaps)].pages) if base.get(p) not in (None, loc))
    box.corrupt_blob(base[pgno].rec)

    result = verify(box.repo(), full=True)

    assert {f.manifest for f in result.findings if f.kind == BAD_SNAPSHOT} == set(snaps), result.findings
    assert result.snapshots == len(snaps)
