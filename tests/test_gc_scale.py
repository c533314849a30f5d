"""gc over many objects (issue 6): it collects everything, and its memory must not grow
with the garbage it collects.

The store is built the way the benchmark's gc part (``tools/bench/parts/gc.py``) builds
its 1,000,000-object one, only smaller: real checkpoints of a small Codex tree, then synthetic garbage packs
written straight into the local store's layout (sparse files: gc only lists them), 99% of them named by the expired manifests (re-encoded to name them, as if
those checkpoints had uploaded them) and 1% named by none (a crashed checkpoint's
orphans). Memory is what ``tracemalloc`` sees allocated while gc runs (peak), at two
store sizes; the bench measures the same thing as the peak RSS of ``journal gc``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tracemalloc
from pathlib import Path

import msgspec
import pytest

from conftest import container_env

from journal.checkpoint.run import checkpoint
from journal.config import load_config
from journal.gc.run import gc
from journal.repository.repository import MANIFEST_PREFIX, PACK_PREFIX, Repository, encode_manifest, manifest_key
from journal.gc.retention import Policy
from journal.store import open_store
from journal.verify import verify

REAL = 12          # real checkpoints
KEEP = 2           # --keep-last
DAY = 86400.0




class Store:
    """A local store holding REAL real checkpoints and ``garbage`` synthetic packs."""

    def __init__(self, root: Path, garbage: int):
        self.path = root / "store"
        self.tree = root / "local" / "codex-home"
        self.tree.mkdir(parents=True)
        (root / "home").mkdir()
        env = container_env(root / "local", self.path, root / "home")
        self.cfg = load_config(env=env)
        self.store = open_store(str(self.path))
        for i in range(REAL):
            self.tick(i)
        self.synthetic = self._add_garbage(garbage)

    def tick(self, i: int) -> None:
        with open(self.tree / "rollout.jsonl", "ab") as fh:
            fh.write(json.dumps({"i": i, "type": "message", "text": f"turn {i} " + "x" * (i * 37 % 300)}).encode() + b"\n")
        notes = self.tree / "notes"
        notes.mkdir(exist_ok=True)
        (notes / f"n{i % 4}.md").write_text(f"note {i}\n" * (10 + i))
        checkpoint(self.cfg, self.store)

    def _add_garbage(self, n: int) -> set[str]:
        repo = Repository.open(self.store)
        expired = list(range(1, REAL - KEEP + 1))
        orphans = n // 100
        named = n - orphans
        made: set[str] = set()

        def pack() -> str:
            pid = hashlib.sha256(f"garbage {len(made)}".encode()).hexdigest()
            d = self.path / "packs" / pid[:2]
            d.mkdir(parents=True, exist_ok=True)
            with open(d / pid, "wb") as fh:
                fh.truncate(4096 + len(made) % 50000)
            made.add(pid)
            return pid

        for j, seq in enumerate(expired):
            share = named * (j + 1) // len(expired) - named * j // len(expired)
            ids = tuple(pack() for _ in range(share))
            manifest, _ = repo.load_manifest(seq)
            _, record = encode_manifest(msgspec.structs.replace(manifest, packs=manifest.packs + ids))
            path = self.path / manifest_key(seq)
            tmp = path.with_name(path.name + ".new")  # not a valid key: never listed
            tmp.write_bytes(record)
            os.replace(tmp, path)
        for _ in range(orphans):
            pack()
        return made

    def repo(self) -> Repository:
        return Repository.open(open_store(str(self.path)))

    def keys(self, prefix: str) -> set[str]:
        return set(self.store.list(prefix))


def traced_gc(store: Store, grace: float):
    """Run one gc (plan and execute); return its peak traced memory in bytes."""
    repo = store.repo()
    tracemalloc.start()
    try:
        gc(repo, Policy(keep_last=KEEP), grace)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def mark_then_sweep(store: Store) -> tuple[int, int]:
    """The mark (nothing is ripe), a checkpoint (the store moves past the mark), the sweep."""
    mark = traced_gc(store, DAY)
    store.tick(REAL)
    sweep = traced_gc(store, 0.0)
    return mark, sweep


@pytest.mark.long(short=2000, full=5000)
def test_gc_over_thousands_of_garbage_packs_collects_all_of_them(root, long_size):
    store = Store(root, long_size)
    packs_before = store.keys(PACK_PREFIX)
    assert {k.rsplit("/", 1)[-1] for k in packs_before} >= store.synthetic

    traced_gc(store, DAY)
    assert store.keys(PACK_PREFIX) == packs_before, "the mark deleted something"
    assert len(store.keys("tombstones/")) >= 1
    store.tick(REAL)
    traced_gc(store, 0.0)

    left = {k.rsplit("/", 1)[-1] for k in store.keys(PACK_PREFIX)}
    assert not left & store.synthetic, f"{len(left & store.synthetic)} garbage packs survived the sweep"
    seqs = [int(k[len(MANIFEST_PREFIX):]) for k in store.keys(MANIFEST_PREFIX)]
    assert sorted(seqs)[-KEEP:] == [REAL, REAL + 1] and len(seqs) <= KEEP + 1, seqs
    assert verify(store.repo()).ok


@pytest.mark.long   # the growth shows only across thousands of objects: no short form
def test_gc_memory_does_not_grow_with_the_garbage(root):
    small_root, big_root = root / "small", root / "big"
    small_root.mkdir()
    big_root.mkdir()
    small = mark_then_sweep(Store(small_root, 2000))
    big = mark_then_sweep(Store(big_root, 20000))

    per_object = [(b - s) / 18000 for s, b in zip(small, big)]
    # The reached set and the page set are the same in both stores (the same real
    # checkpoints): a gc that streams its listings and tombstones grows by ~0 bytes
    # per extra garbage object. Allow 32.
    assert max(per_object) < 32, (f"gc peak memory grows {per_object[0]:.0f} bytes (mark) and {per_object[1]:.0f} "
                                  f"bytes (sweep) per garbage object: {small} -> {big}")
