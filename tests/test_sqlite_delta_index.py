"""Index pages on the tick after they were written (measured while cutting per-tick bytes).

An inner page names its children in its own pack with an empty ``pack`` field. Built
again on the next checkpoint, the same page names that pack explicitly, so its
payload (and id) differ, and before the fix every inner page a checkpoint wrote was
written again, unchanged, by the next one (15 pages instead of 4 for a one-file
change in a 20,000-file tree). The builder now finds the stored copy.
"""

from __future__ import annotations

import hashlib

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
