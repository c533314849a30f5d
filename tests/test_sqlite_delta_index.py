"""Index pages on the tick after they were written (measured while cutting per-tick bytes).

An inner page names its children in its own pack with an empty ``pack`` field. Built
again on the next checkpoint, the same page names that pack explicitly, so its
payload (and id) differ, and before the fix every inner page a checkpoint wrote was
written again, unchanged, by the next one (15 pages instead of 4 for a one-file
change in a 20,000-file tree). The builder now finds the stored copy.
"""

from __future__ import annotations

import hashlib
import random

import pytest

import msgspec

from journal.format.index import build_index, iter_pages
from journal.format.model import BlobRef, Entry, Page, decode


class Packs:
    """What a checkpoint does with index pages: one pack per build, placeholders resolved after."""

    def __init__(self):
        self.payloads: dict[tuple[str, str], bytes] = {}
        self.added = 0

    def build(self, entries: list[Entry], known: dict[str, BlobRef], name: str):
        pack = hashlib.sha256(name.encode()).hexdigest()
        slot = f"@{pack}"

        def add(payload: bytes, _key) -> BlobRef:
            self.added += 1
            pid = hashlib.sha256(payload).hexdigest()
            self.payloads[(pack, pid)] = payload
            return BlobRef(pid, slot, 0, len(payload), len(payload))

        root, used = build_index(entries, known, add)
        resolve = lambda r: msgspec.structs.replace(r, pack=pack) if r.pack == slot else r  # noqa: E731
        return resolve(root), {pid: resolve(ref) for pid, ref in used.items()}

    def read(self, ref: BlobRef) -> bytes:
        return self.payloads[(ref.pack, ref.id)]


def entries(n: int, changed: frozenset[int] = frozenset()) -> list[Entry]:
    return [Entry(path=f"projects/p{i // 100:03d}/session-{i:05d}.jsonl", kind="jsonl", mode=0o644,
                  mtime_ns=1 + (i in changed)) for i in range(n)]


def test_a_one_file_change_writes_only_the_pages_on_its_path():
    packs = Packs()
    root1, known = packs.build(entries(20000), {}, "p1")
    levels = max(decode(packs.read(ref), Page).level for ref, _ in iter_pages(root1, packs.read)) + 1
    assert levels >= 3, "the tree must have inner pages for this test to mean anything"
    inner = sum(1 for _, page in iter_pages(root1, packs.read) if page.level > 0)
    assert inner > levels

    changed: frozenset[int] = frozenset()
    for tick, one in enumerate((17, 12500, 19999, 18), 2):   # one more file changes each tick
        changed |= {one}
        packs.added = 0
        root, known = packs.build(entries(20000, changed), known, f"p{tick}")
        assert packs.added == levels, f"tick {tick}: {packs.added} pages written for one changed file"
        got = [e for _, page in iter_pages(root, packs.read) for e in page.entries]
        assert got == entries(20000, changed)
    packs.added = 0
    again, _ = packs.build(entries(20000, changed), known, "p9")
    assert packs.added == 0 and again == root, "an unchanged tree writes nothing"


# --- Leaf pages taken back from the last index without encoding them (build_index's ``previous``) ---

def build_counting(entries_now: list[Entry], known: dict[str, BlobRef], previous, monkeypatch) -> tuple:
    """``(root, used, keys, leaves encoded)`` of one build into a memory 'pack'."""
    from journal.format import index

    encoded = []
    real = index.encode
    monkeypatch.setattr(index, "encode", lambda page: encoded.append(page.level) or real(page))

    def add(payload: bytes, _key) -> BlobRef:
        pid = hashlib.sha256(payload).hexdigest()
        return BlobRef(pid, "a" * 64, 0, len(payload), len(payload))

    keys: dict = {}
    root, used = build_index(entries_now, known, add, keys, previous=previous)
    monkeypatch.setattr(index, "encode", real)
    return root, used, keys, encoded.count(0)


def previous_of(entries_then: list[Entry], used: dict, keys: dict, entries_now: list[Entry]):
    from journal.format.index import Previous

    held = {e.path: e for e in entries_then}
    now = {e.path for e in entries_now}
    differ = [e.path for e in entries_now if held.get(e.path) is not e] + [p for p in held if p not in now]
    return Previous({first: used[pid] for pid, (level, first) in keys.items() if level == 0}, sorted(differ))


def test_a_one_file_change_encodes_one_leaf_page(monkeypatch):
    then = entries(20000)
    root, known, keys, leaves = build_counting(then, {}, None, monkeypatch)
    assert leaves > 200
    now = list(then)
    now[12500] = entries(20000, frozenset({12500}))[12500]

    root_now, used, _keys, leaves = build_counting(now, known, previous_of(then, known, keys, now), monkeypatch)

    assert leaves == 1
    assert (root_now, used) == build_counting(now, known, None, monkeypatch)[:2]


def test_a_one_file_change_hashes_the_paths_of_one_leaf_not_of_every_path(monkeypatch):
    """Leaf boundaries are a hash of each path; the runs the last index held as one leaf,
    none of whose paths differ, are cut where that leaf was without hashing their paths:
    of 20,000 paths, those of the changed leaf and one per leaf and inner page."""
    from journal.format import index

    then = entries(20000)
    root, known, keys, leaves = build_counting(then, {}, None, monkeypatch)
    now = list(then)
    now[12500] = entries(20000, frozenset({12500}))[12500]
    hashed = []
    real = index._boundary
    monkeypatch.setattr(index, "_boundary", lambda name, *args: hashed.append(name) or real(name, *args))
    build_counting(now, known, previous_of(then, known, keys, now), monkeypatch)
    assert len(hashed) < 2 * leaves + 4 * 64, (len(hashed), leaves)


@pytest.mark.parametrize("fanout,max_items", [(64, 1024), (4, 1024), (2, 3)])
def test_leaves_taken_back_give_the_very_index_a_full_build_gives(monkeypatch, fanout, max_items):
    """Random adds, removals and changes, on trees from 1 to 300 paths, with small page
    sizes and a small ``MAX_ITEMS`` (cuts by count, and trees where every path is a
    boundary): a build that takes leaves back equals the full build, page for page."""
    from journal.format import index

    monkeypatch.setattr(index, "LEAF_FANOUT", fanout)
    monkeypatch.setattr(index, "MAX_ITEMS", max_items)
    rng = random.Random(f"{fanout}:{max_items}")
    taken = 0
    for _ in range(150):
        n = rng.choice([1, 2, 3, 5, 8, 40, 300])
        then = [Entry(path=f"d/{i:04d}", kind="jsonl", mode=0o644, mtime_ns=1) for i in sorted(rng.sample(range(400), n))]
        root, known, keys, full = build_counting(then, {}, None, monkeypatch)
        now = list(then)
        for _ in range(rng.choice([0, 1, 2, 5])):
            op, i = rng.choice(["add", "drop", "change"]), rng.randrange(400)
            path = f"d/{i:04d}"
            now = [e for e in now if e.path != path] if op != "add" or all(e.path != path for e in now) else now
            if op != "drop":
                now = sorted([*now, Entry(path=path, kind="jsonl", mode=0o644, mtime_ns=2)], key=lambda e: e.path)
        if not now:
            continue
        want = build_counting(now, known, None, monkeypatch)
        got = build_counting(now, known, previous_of(then, known, keys, now), monkeypatch)
        assert got[:3] == want[:3], (then, now)
        taken += want[3] - got[3]
    assert taken > 0


@pytest.mark.parametrize("key", [b"", bytes(range(32))], ids=["plain", "keyed"])
def test_the_leaves_cut_without_hashing_equals_the_full_cut_over_chains_of_builds(monkeypatch, key):
    """``_leaves`` against ``_chunk`` on random trees, each build's leaves the next one's
    last index (so a cut taken back is taken back again), with keyed boundaries as an
    encrypted store has them, small page sizes and ``MAX_ITEMS`` (cuts by count), and
    adds, removals and changes anywhere (the first and the last leaf too)."""
    from journal.format import index
    from journal.format.index import Previous, _chunk, _leaves

    rng = random.Random(key)
    taken = 0
    for _ in range(300):
        monkeypatch.setattr(index, "LEAF_FANOUT", rng.choice([2, 3, 8, 64]))
        monkeypatch.setattr(index, "MAX_ITEMS", rng.choice([2, 3, 5, 1024]))
        universe = rng.choice([10, 60, 400])
        make = lambda i, v=1: Entry(path=f"d{i % 7}/{i:04d}", kind="jsonl", mode=0o644, mtime_ns=v)  # noqa: E731
        now = sorted((make(i) for i in rng.sample(range(universe), rng.randint(1, universe))), key=lambda e: e.path)
        previous = None
        for _ in range(4):
            names = [e.path for e in now]
            want = _chunk(now, names, 0, index.LEAF_FANOUT, key)
            got = _leaves(now, names, previous, key)
            assert ([[e.path for e in g] for g in got[0]], got[1]) == ([[e.path for e in g] for g in want[0]], want[1])
            taken += previous is not None and len(got[0]) > 1
            then, leaves = now, {g[0].path: BlobRef(f"{n:064x}", "a" * 64, 0, 1, 1) for n, g in enumerate(got[0])}
            for _ in range(rng.choice([0, 1, 3, 20])):
                i = rng.randrange(universe)
                now = [e for e in now if e.path != make(i).path]
                if rng.random() < 0.6:
                    now = sorted([*now, make(i, rng.randrange(1 << 30))], key=lambda e: e.path)
            if not now:
                break
            held, paths = {e.path: e for e in then}, {e.path for e in now}
            previous = Previous(leaves, sorted([e.path for e in now if held.get(e.path) is not e]
                                               + [p for p in held if p not in paths]))
    assert taken > 100


# --- An index updated from its last one (``update_index``): only the changed leaves read and cut ---

@pytest.mark.parametrize("key", [b"", bytes(range(32))], ids=["plain", "keyed"])
def test_an_index_updated_from_its_last_one_is_the_very_index_a_full_build_gives(monkeypatch, key):
    """Chains of builds on random trees (one to 400 paths, in nested directories), each
    the next one's last index, stored with same-pack children as a checkpoint stores
    them; adds, removals and changes anywhere (before the first leaf, after the last,
    a leaf's first path, every path); small page sizes and ``MAX_ITEMS`` (cuts at the
    limit), and keyed boundaries as an encrypted store has them: every update that
    answers gives the root, the pages and the page keys the full build gives, and
    reads no leaf page that no changed path falls in but those a re-cut runs into."""
    from journal.format import index
    from journal.format.codec import Codec
    from journal.format.index import Update, decode_page, update_index

    class Keyed(Codec):
        boundary_key = key

    codec = Keyed()
    rng = random.Random(key)
    payloads: dict[tuple[str, str], bytes] = {}
    updated = declined = 0
    for trial in range(250):
        monkeypatch.setattr(index, "LEAF_FANOUT", rng.choice([2, 3, 8, 64]))
        monkeypatch.setattr(index, "INNER_FANOUT", rng.choice([2, 4, 32]))
        monkeypatch.setattr(index, "MAX_ITEMS", rng.choice([2, 3, 5, 1024]))
        universe = rng.choice([3, 12, 60, 400])
        make = lambda i, v=1: Entry(path=f"d{i % 5}/{'s/' if i % 3 else ''}{i:04d}", kind="jsonl",  # noqa: E731
                                    mode=0o644, mtime_ns=v)
        now = sorted((make(i) for i in rng.sample(range(universe), rng.randint(1, universe))), key=lambda e: e.path)
        root, known, then = None, {}, now
        for step in range(5):
            pack = hashlib.sha256(f"{key!r}:{trial}:{step}".encode()).hexdigest()
            slot = f"@{pack}"
            added: list[bytes] = []

            def add(payload: bytes, _key) -> BlobRef:
                added.append(payload)
                return BlobRef(codec.id(payload), slot, 0, len(payload), len(payload))

            want_keys: dict = {}
            want = build_index(now, known, add, want_keys, codec)
            if root is not None:
                read = []
                got_keys: dict = {}
                held, paths = {e.path: e for e in then}, {e.path for e in now}
                differ = sorted([e.path for e in now if held.get(e.path) is not e] + [p for p in held if p not in paths])
                by_path = {e.path: e for e in now}
                got = update_index(Update(root, differ, by_path.get),
                                   lambda ref, where: read.append(ref.id) or decode_page(payloads[(ref.pack, ref.id)],
                                                                                         where),
                                   known, add, got_keys, codec)
                if got is None:
                    declined += 1
                else:
                    updated += 1
                    assert (got, got_keys) == (want, want_keys), (trial, step)
            resolve = lambda r: msgspec.structs.replace(r, pack=pack) if r.pack == slot else r  # noqa: E731
            for payload in added:
                payloads[(pack, codec.id(payload))] = payload
            root = resolve(want[0]) if want[0] is not None else None
            known = {pid: resolve(ref) for pid, ref in want[1].items()}
            then = now
            for _ in range(rng.choice([0, 1, 2, 5, universe])):
                i = rng.randrange(universe)
                now = [e for e in now if e.path != make(i).path]
                if rng.random() < 0.6:
                    now = sorted([*now, make(i, rng.randrange(1 << 30))], key=lambda e: e.path)
            if not now or root is None:
                break
    assert updated > 300 and declined < updated, (updated, declined)


def test_a_one_file_change_in_20000_paths_reads_the_inner_pages_and_one_leaf():
    """What a busy tick of a large tree reads and writes: the last index's inner pages
    and the one leaf the changed path is in, and one new page per level."""
    from journal.format.index import Update, decode_page, update_index

    packs = Packs()
    then = entries(20000)
    root, known = packs.build(then, {}, "p1")
    pages = {ref.id: page for ref, page in iter_pages(root, packs.read)}
    inner = sum(1 for page in pages.values() if page.level)
    now = entries(20000, frozenset({12500}))
    read, added = [], []

    def add(payload: bytes, _key) -> BlobRef:
        added.append(payload)
        return BlobRef(hashlib.sha256(payload).hexdigest(), "@p2", 0, len(payload), len(payload))

    got = update_index(Update(root, [now[12500].path], {now[12500].path: now[12500]}.get),
                       lambda ref, where: read.append(ref.id) or decode_page(packs.read(ref), where), known, add)
    assert got == build_index(now, known, add)
    levels = max(page.level for page in pages.values()) + 1
    assert (len(read), len(added)) == (inner + 1, 2 * levels), "one leaf read; each level's page written (twice: both builds)"
