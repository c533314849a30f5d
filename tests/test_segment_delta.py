"""JSONL segments stored as deltas against their anchor (journal/format/segments.py)."""

from __future__ import annotations

import json

from journal.checkpoint.capture import TAILS
from journal.format.objects import FLAG_DELTA, HEADER, parse_header
from journal.repository.repository import pack_key
from journal.format.segments import ANCHOR_MIN, anchor_refs, anchors
from journal.repository.segments import read_segment
from journal.verify import verify

ROLLOUT = "sessions/2026/02/23"


def rollout(live):
    return sorted((live.local / "codex-home" / ROLLOUT).iterdir())[0]


def event(i: int) -> bytes:
    return json.dumps({"timestamp": f"2026-02-23T12:{i // 60:02d}:{i % 60:02d}Z", "type": "response_item",
                       "payload": {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": f"step {i}: ran the tests again"}]}
                      }).encode() + b"\n"


def entry_of(live, path):
    """The newest manifest's entry of the rollout at ``path``."""
    return live.entries("codex")[path.relative_to(live.local / "codex-home").as_posix()]


def appended_once(live, i: int):
    """The first rollout checkpointed, then again with ``event(i)`` appended: (path, entry)."""
    path = rollout(live)
    live.checkpoint()
    with open(path, "ab") as fh:
        fh.write(event(i))
    live.checkpoint()
    return path, entry_of(live, path)


def assert_restores_intact(live, path, tmp_path) -> None:
    assert verify(live.repo(), full=True).ok
    out = tmp_path / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    assert (out / "codex" / ROLLOUT / path.name).read_bytes() == path.read_bytes()


def flags_of(live, ref) -> int:
    data = live.store.get(pack_key(ref.pack), ref.offset, ref.offset + HEADER.size)
    return parse_header(data, key="segment").flags


def test_anchor_rule():
    assert anchors([]) == []
    assert anchors([10, 20, 30]) == [None, 0, 0]
    assert anchors([ANCHOR_MIN, 5, ANCHOR_MIN + 1, 7, 8]) == [None, 0, None, 2, 2]


def test_appended_lines_are_deltas_of_the_anchor_and_much_smaller(live, tmp_path):
    path = rollout(live)
    live.checkpoint()
    sizes = []
    for tick in range(3):
        with open(path, "ab") as fh:
            fh.write(b"".join(event(tick * 10 + i) for i in range(10)))
        before = live.store.put_bytes
        live.checkpoint()
        sizes.append(live.store.put_bytes - before)

    entry = entry_of(live, path)
    base_of = anchors([r.size for r in entry.refs])
    assert base_of[-1] is not None
    for ref, anchor in zip(entry.refs, base_of):
        assert bool(flags_of(live, ref) & FLAG_DELTA) == (anchor is not None)
    # ten ~250-byte lines alone compress ~3x; against the transcript so far, far more
    new = entry.refs[-1]
    assert new.length < new.size / 5, (new.length, new.size)
    assert_restores_intact(live, path, tmp_path)


def test_a_segment_reads_alone_with_its_anchor(live):
    _path, entry = appended_once(live, 1)
    repo = live.repo()
    last, anchor = entry.refs[-1], anchor_refs(entry.refs)[-1]
    assert read_segment(repo, last, anchor) == event(1)


def test_an_anchor_edited_in_place_rebases_instead_of_publishing_an_undecodable_delta(live, tmp_path):
    path, _entry = appended_once(live, 1)  # refs: [anchor, delta]; the append check re-hashes only the delta
    TAILS._tails.clear()  # a new process: the anchor must be read back from the file
    data = bytearray(path.read_bytes())
    data[10] = ord("X") if data[10] != ord("X") else ord("Y")  # same size, same inode: looks like an append
    path.write_bytes(bytes(data) + event(2))

    live.checkpoint()

    entry = entry_of(live, path)
    assert entry.size == len(path.read_bytes())
    assert_restores_intact(live, path, tmp_path)


def test_a_corrupt_anchor_is_reported_for_its_deltas(live):
    path, entry = appended_once(live, 3)
    anchor = anchor_refs(entry.refs)[-1]
    live.corrupt_blob(anchor)

    result = verify(live.repo(), full=True)
    assert not result.ok
    assert {f.kind for f in result.findings} == {"corrupt-object"}
    assert len(result.findings) >= 2  # the anchor itself and the delta that needs it
