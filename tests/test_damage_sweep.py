"""Damage sweeps (``tools/reliability/damage.py``): each kind of stored object (the input
journal's too) flipped, truncated, emptied, deleted and swapped with another of its kind, and crafted
checkpoints (traversal and absolute paths, duplicate paths, huge sizes, a child
repeated 10^6 times, a page cycle, a decompression bomb).

``verify --full`` must report every damage the store can show (100%); a restore never
writes a byte no checkpoint held, ends clean only when nothing the newest checkpoint
needs is damaged or it restored exactly the newest trees (a flipped bit restore's
checks cannot see, as a zstd frame-header bit that decodes the same, is verify's),
and otherwise falls back (exit 3) or names what it lost (exit 1), writing nothing
outside its container; gc's own bookkeeping (tombstones, the lease),
damaged, costs no data. ``make test`` runs one object of each kind, one damage each,
and every crafted checkpoint; the ``long`` form (``make torture``) damages every
object every way.
"""

from __future__ import annotations

import pytest

from tools.reliability.damage import CRAFTED, DamageSweep

SEED = 26


def sweep(tmp_path, every: bool):
    result = DamageSweep(tmp_path, seed=SEED).run(every=every, seed=SEED)
    assert result.problems == []
    assert result.reported == result.must_report > 0, result.line()
    return result


def test_one_of_each_object_kind_damaged_and_every_crafted_checkpoint(tmp_path):
    result = sweep(tmp_path, every=False)
    for target in ("record:chunk", "record:segment", "record:page", "record:pagemap", "record:dbpage", "pack",
                   "manifest-newest", "manifest-old", "config", "tombstone", "lease", "input", "delivery", "claim"):
        assert result.by_target.get(target), f"no {target} case: {result.by_target}"
    assert all(result.by_target[f"crafted:{name}"] == 1 for name in CRAFTED)
    assert set(result.restores) <= {0, 1, 3} and result.restores.get(3) and result.restores.get(1), result.line()


@pytest.mark.long
@pytest.mark.timeout(7200)
def test_every_object_damaged_every_way(tmp_path):
    sweep(tmp_path, every=True)
