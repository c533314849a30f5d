"""Verify reads what checkpoints share once (``journal/verify_shared.py``): every
distinct index page and page map is fetched once however many manifests name it, and
a subtree met again is still checked where each tree names it."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter

import msgspec
import pytest

from conftest import CodexLive, OpencodeLive
from journal.errors import CorruptObject
from journal.format.index import page_key
from journal.format.model import Page, PageRef, TreeRoot
from journal.format.objects import KIND_PAGEMAP, encode_record
from journal.format.pagemap import encode_map, load_snapshot
from journal.repository.history import ManifestCache
from journal.repository.repository import PACK_PREFIX, Repository
from journal.store import open_store
from journal.verify import BAD_SNAPSHOT, CORRUPT_PAGE, UNSAFE_PATH, verify
from test_gc import CountingStore


def counted_verify(box) -> tuple:
    """``verify`` through a store that records every read: ``(result, pack reads by range)``."""
    store = CountingStore(open_store(str(box.store_path)))
    result = verify(Repository.open(store))
    return result, Counter((key, start, end) for key, start, end in store.gets if key.startswith(PACK_PREFIX))


def pages_named(box) -> tuple[int, set]:
    """``(pages each manifest's trees name, summed; the distinct pages among them)``."""
    cache = ManifestCache(box.repo())
    named, distinct = 0, set()
    for seq in box.seqs():
        for name in box.manifest(seq).trees:
            _entries, pages = cache.tree(seq, name)
            named += len(pages)
            distinct.update((ref.pack, ref.id) for ref in pages.values())
    return named, distinct


def notes_box(tmp_path, changes: int, step: int) -> CodexLive:
    """A tree of 600 notes checkpointed, then ``changes`` checkpoints of one note each
    (every ``step``-th): the trees name most of their pages in common."""
    box = CodexLive(tmp_path)
    for i in range(600):
        box.write(f"notes/n{i:04d}.md", f"note {i}\n")
    box.checkpoint()
    for i in range(changes):
        box.write(f"notes/n{i * step:04d}.md", f"note {i} again\n")
        box.checkpoint()
    return box


def test_verify_reads_each_distinct_index_page_once_however_many_checkpoints_name_it(tmp_path):
    """Eight checkpoints of a tree of 600 files, one file changed in each: the trees
    name most of their pages in common. Verify fetched every page once for gc's reach
    and again for each manifest naming it (24 ms a checkpoint at 1,000 checkpoints)."""
    box = notes_box(tmp_path, changes=7, step=83)
    named, distinct = pages_named(box)

    result, reads = counted_verify(box)

    assert result.ok and result.manifests == 8, result.findings
    assert named > 2 * len(distinct) > 20, (named, len(distinct))   # most pages are shared
    assert result.pages == len(distinct)
    assert max(reads.values()) == 1, [r for r, n in reads.items() if n > 1][:5]


def test_verify_reads_a_checkpoint_s_index_pages_from_its_small_pack_with_one_read(tmp_path):
    """A checkpoint's new index pages sit in its one small index pack: verify reads each
    small pack once, whole, for all of its records (before: one read per page)."""
    box = notes_box(tmp_path, changes=3, step=211)

    result, reads = counted_verify(box)

    per_pack = Counter(key for key, _start, _end in reads.elements())
    assert result.ok and result.manifests == 4, result.findings
    assert max(per_pack.values()) == 1 and len(per_pack) < result.pages, (per_pack, result.pages)


def database_ticks(box: OpencodeLive, ticks: int, row=lambda rng: f"{rng.getrandbits(256):064x}" * 8) -> None:
    """A database of 1,500 rows (each ``row(rng)``), then ``ticks`` ticks of a row added
    and one changed each."""
    con = sqlite3.connect(box.db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE message(id INTEGER PRIMARY KEY, data TEXT)")
    rng = random.Random(1)
    con.executemany("INSERT INTO message(data) VALUES (?)", [(row(rng),) for _ in range(1500)])
    box.tick()
    for n in range(ticks):
        con.execute("INSERT INTO message(data) VALUES (?)", (f"row {n}",))
        con.execute("UPDATE message SET data = ? WHERE id = ?", (f"changed {n}", rng.randrange(1, 1500)))
        box.tick()
    con.close()


def test_verify_reads_each_page_map_once_though_every_snapshot_names_the_full_map(tmp_path):
    """Six snapshots of a database, each a few rows on: every one names the same full
    map (and the later ones the same cumulative delta map). Each map was read and
    decoded again for every snapshot naming it, and once more for gc's reach."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    database_ticks(box, 5)
    full_maps = {box.entry(seq).refs[0] for seq in box.seqs()}

    result, reads = counted_verify(box)

    assert result.ok and result.manifests == 6, result.findings
    assert len(full_maps) == 1
    assert max(reads.values()) == 1, [r for r, n in reads.items() if n > 1][:5]


def leaf(box, *paths: str) -> Page:
    return Page(level=0, entries=tuple(box.chunk_entry(p) for p in paths))


def inner(level: int, *children: tuple[str, object, int]) -> Page:
    return Page(level=level, children=tuple(PageRef(first, ref, files, 6 * files) for first, ref, files in children))


def test_an_entry_inside_a_file_entry_pages_before_it_is_refused_in_every_checkpoint(tmp_path):
    """'a' a file in the first leaf, 'a/b' two leaves on, past 'a-x' and 'a.y' (which
    sort between them): every checkpoint naming 'a/b' reports it, also the one that meets
    its leaf remembered from a checkpoint without 'a'."""
    box = CodexLive(tmp_path)
    box.write("config.toml", "x\n")
    box.checkpoint()
    first, with_a, middle, last = box.put_pages(leaf(box, "0"), leaf(box, "a"), leaf(box, "a-x", "a.y"),
                                                leaf(box, "a/b"))
    bad, good = box.put_pages(inner(1, ("a", with_a, 1), ("a-x", middle, 2), ("a/b", last, 1)),
                              inner(1, ("0", first, 1), ("a-x", middle, 2), ("a/b", last, 1)))
    box.publish({"codex": TreeRoot(root=bad, files=4, bytes=24)})
    box.publish({"codex": TreeRoot(root=good, files=4, bytes=24)})
    box.publish({"codex": TreeRoot(root=bad, files=4, bytes=24)})

    result = verify(box.repo())

    assert [(f.kind, f.manifest, f.key) for f in result.findings] == [(UNSAFE_PATH, 4, "codex/a/b"),
                                                                      (UNSAFE_PATH, 2, "codex/a/b")]
    assert all("it is inside the file entry 'a', not a directory" in f.detail for f in result.findings)


def test_a_remembered_subtree_is_checked_against_each_parent_that_names_it(tmp_path):
    """Checkpoint 3 holds a sound subtree; checkpoint 2 names it where the next sibling
    starts at 'd', which its last leaf reaches, and says fewer files than it holds. Read
    from memory, it is refused where a walk page by page refuses it."""
    box = CodexLive(tmp_path)
    box.write("config.toml", "x\n")
    box.checkpoint()
    left, right, d, e = box.put_pages(leaf(box, "a", "b"), leaf(box, "c", "d"), leaf(box, "d"), leaf(box, "e"))
    sub, after_d, after_e = box.put_pages(inner(1, ("a", left, 2), ("c", right, 2)), inner(1, ("d", d, 1)),
                                          inner(1, ("e", e, 1)))
    cut, whole = box.put_pages(inner(2, ("a", sub, 4), ("d", after_d, 1)), inner(2, ("a", sub, 4), ("e", after_e, 1)))
    box.publish({"codex": TreeRoot(root=cut, files=5, bytes=30)})
    box.publish({"codex": TreeRoot(root=whole, files=5, bytes=30)})
    box.publish({"codex": TreeRoot(root=whole, files=1, bytes=18)})

    result = verify(box.repo())

    assert [(f.kind, f.manifest, f.key, f.detail) for f in result.findings] == [
        (CORRUPT_PAGE, 4, page_key(left), "tree codex: the tree holds more than the 1 files its manifest says"),
        (CORRUPT_PAGE, 2, page_key(right),
         "tree codex: the page spans 'c' to 'd', its parent says from 'c' to before 'd'")]


@pytest.mark.parametrize("case", ["a delta first", "two full maps", "pages past the maps", "a size not its pages'"])
def test_a_snapshot_whose_maps_do_not_fit_is_reported_as_its_rebuild_finds_it(tmp_path, case):
    """Checked from its maps' shapes, a snapshot is refused where ``load_snapshot``
    refuses it, in the same words: a delta map first, a full map where a delta must be,
    a page count past every page its maps hold, a size that is not its pages'."""
    box = OpencodeLive(tmp_path, tmp_path / "store")
    database_ticks(box, 1)
    entry, repo = box.entry(), box.repo()
    full, delta = entry.refs[:2]
    count = len(load_snapshot(entry.refs, repo.read_blob).pages)
    payload = encode_map(False, 4096, count + 3, {}, lambda ref: ref.pack)
    (past,) = box.put_records([encode_record(KIND_PAGEMAP, payload) + (len(payload),)])
    refs = {"a delta first": (delta,), "two full maps": (full, full), "pages past the maps": (full, past),
            "a size not its pages'": entry.refs}[case]
    size = entry.size + (4096 if case == "a size not its pages'" else 0)
    crafted = msgspec.structs.replace(entry, refs=refs, size=size)
    seq = box.publish({box.TREE: TreeRoot(root=box.put_tree([crafted]), files=1, bytes=size)})
    try:
        expected = f"the entry says {size:,} bytes, its page maps {count:,} pages of 4,096"
        load_snapshot(refs, repo.read_blob)
    except CorruptObject as err:
        expected = f"page map: {err}"

    result = verify(box.repo())

    assert [(f.kind, f.manifest, f.key, f.detail) for f in result.errors] == [
        (BAD_SNAPSHOT, seq, f"{box.TREE}/{entry.path}", expected)]
    assert case != "pages past the maps" or f"page {count} of {count + 3} is missing" in expected
