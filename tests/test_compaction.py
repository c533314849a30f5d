"""Leveled compaction of JSONL segments (capture.append_segments, design §6).

The merge rule must keep a transcript's segment count logarithmic and its write
amplification low whatever the mix of append sizes: agents append one-line events and
multi-KiB tool outputs in any order. The rule it replaced (merge four segments of the
same size tier) never merged once small and large appends were mixed, so such a
transcript grew one segment per checkpoint and its restore one object per checkpoint.
"""

from __future__ import annotations

import hashlib
import os
import random

import pytest

from journal.checkpoint.capture import MERGE_FANOUT, append_segments
from journal.format.model import BlobRef


class Recorder:
    """An ``add`` for append_segments that stores nothing and counts what it would upload."""

    def __init__(self):
        self.uploaded = 0

    def __call__(self, kind, data, base=None):
        self.uploaded += len(data)
        return BlobRef(hashlib.sha256(data).hexdigest(), "pack", 0, len(data), len(data))


def _lines(rng: random.Random, size: int) -> bytes:
    """About ``size`` bytes of complete JSON lines."""
    return b"".join(b'{"t":"%010d"}\n' % rng.getrandbits(30) for _ in range(max(1, size // 17)))


def grow(path, sizes, seed=1):
    """Append ``sizes`` bytes of complete lines, one checkpoint each; returns
    (refs, bytes uploaded, bytes appended, most segments at any time)."""
    rng = random.Random(seed)
    refs: list[BlobRef] = []
    add = Recorder()
    appended = most = 0
    with open(path, "wb") as fh:
        for size in sizes:
            data = _lines(rng, size)
            fh.write(data)
            fh.flush()
            appended += len(data)
            fd = os.open(path, os.O_RDONLY)
            try:
                refs = append_segments(fd, refs, [data], add)
            finally:
                os.close(fd)
            assert refs is not None
            most = max(most, len(refs))
    assert sum(r.size for r in refs) == appended
    return refs, add.uploaded, appended, most


@pytest.mark.parametrize("mix", ["uniform-small", "uniform-kib", "mixed"])
def test_segment_count_stays_logarithmic_and_rewrites_stay_few(tmp_path, mix):
    rng = random.Random(mix)
    n = 3000
    sizes = {"uniform-small": lambda: rng.randint(150, 350),
             "uniform-kib": lambda: rng.randint(3072, 6144),
             "mixed": lambda: rng.choice([200, 300, 800, 5000, 20000])}[mix]
    refs, uploaded, appended, most = grow(tmp_path / "t.jsonl", [sizes() for _ in range(n)])
    # 3,000 checkpoints: log8(3000) ~ 4 levels of at most 7 segments each, far fewer in practice.
    assert most <= 24, most
    assert len(refs) <= 24
    # each byte is uploaded once when appended and once per level it is merged into
    assert uploaded <= 8 * appended, uploaded / appended


def test_a_merged_run_keeps_the_file_order_and_content(tmp_path):
    path = tmp_path / "t.jsonl"
    refs, _, _, _ = grow(path, [100 + (i * 37) % 900 for i in range(200)])
    data = path.read_bytes()
    pos = 0
    for ref in refs:
        assert hashlib.sha256(data[pos:pos + ref.size]).hexdigest() == ref.id
        pos += ref.size
    assert pos == len(data)
    assert len(refs) < 200 // MERGE_FANOUT
