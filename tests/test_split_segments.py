"""A transcript's complete lines cut into segments (``checkpoint/capture.split_segments``):
with the block and segment sizes made tiny, every cut agrees with the rule written
out plainly over the whole bytes in memory, whatever the lines' lengths, and a file
whose last segment would end inside a line is refused."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal.checkpoint import capture
from journal.checkpoint.capture import Changed, split_segments

BLOCK, TARGET, MAX = 8, 30, 56   # READ_BLOCK, SEGMENT_TARGET, SEGMENT_MAX at a tiny scale


def expected(data: bytes, start: int, end: int) -> list[tuple[int, bytes]]:
    """The documented rule: blocks of ``BLOCK`` read from ``start``; a segment closes,
    once at least ``TARGET`` bytes are held and one of them is a line end, at the last
    line end held, or at ``MAX`` bytes when none is; what is left ends at the last line end."""
    out, seg_start, pos = [], start, start
    while pos < end:
        pos = min(pos + BLOCK, end)
        held = data[seg_start:pos]
        last = held.rfind(b"\n") + 1
        if (last and len(held) >= TARGET) or len(held) >= MAX:
            cut = last or MAX
            out.append((seg_start, held[:cut]))
            seg_start += cut
    rest = data[seg_start:end]
    if rest:
        assert rest.endswith(b"\n") or not out   # the inputs below end in a line end
        out.append((seg_start, rest))
    return out


lines = st.lists(st.integers(0, 130), min_size=1, max_size=40)


@pytest.fixture(scope="module")
def tiny():
    """The module's sizes made tiny for the whole module (hypothesis calls a test many
    times within one fixture's life)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(capture, "READ_BLOCK", BLOCK)
        patch.setattr(capture, "SEGMENT_TARGET", TARGET)
        patch.setattr(capture, "SEGMENT_MAX", MAX)
        yield


@settings(max_examples=300, deadline=None)
@given(lines=lines, skip=st.integers(0, 3))
def test_segments_follow_the_rule(tiny, tmp_path_factory, lines, skip):
    data = b"".join(bytes([97 + i % 26]) * n + b"\n" for i, n in enumerate(lines))
    start = sum(n + 1 for n in lines[:min(skip, len(lines) - 1)])
    path = tmp_path_factory.mktemp("seg") / "t.jsonl"
    path.write_bytes(data + b"torn")
    fd = os.open(path, os.O_RDONLY)
    try:
        got = list(split_segments(fd, start, len(data)))
    finally:
        os.close(fd)
    assert got == expected(data, start, len(data))
    assert all(type(seg) is bytes for _, seg in got)
    assert b"".join(seg for _, seg in got) == data[start:]


def test_a_line_rewritten_under_a_cut_is_refused(tiny, tmp_path):
    """A long line cut at ``MAX`` must end before ``end``: a file with no line end
    after the cut (rewritten meanwhile) raises ``Changed``, never a torn segment."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"x" * (MAX + 10))
    fd = os.open(path, os.O_RDONLY)
    try:
        segments = split_segments(fd, 0, MAX + 10)
        assert next(segments) == (0, b"x" * MAX)
        with pytest.raises(Changed):
            next(segments)
    finally:
        os.close(fd)
