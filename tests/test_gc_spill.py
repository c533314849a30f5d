"""gc's spill (``journal/gc/spill.py``): ascending merges, and what a listing lacks."""

from __future__ import annotations

import journal.gc.spill as spill_module
from journal.gc.spill import Ascending, Spill, Table


def test_an_ascending_merge_answers_ascending_questions_and_reports_what_none_matched():
    missed: list[str] = []
    values = Ascending(["b", "c", "c", "d", "f", "h"], missed.append)

    asked = [x for x in "acefg" if x in values]
    assert asked == ["c", "f"] and missed == ["b", "d"]  # the duplicate "c" matched once: not missed
    values.finish()
    assert missed == ["b", "d", "h"]


def test_a_sealed_spill_takes_batches_during_a_merge_and_answers_lookups(monkeypatch):
    monkeypatch.setattr(spill_module, "BATCH_ROWS", 2)
    spill = Spill()
    try:
        spill.add(Table.MARKED, reversed("abcdefg"))
        spill.seal()
        gone = spill.batch(Table.GONE)
        marked = spill.ascending(Table.MARKED, gone)
        assert all(listed in marked for listed in "aceg")  # the listing lacks b, d and f
        marked.finish()
        gone.flush()
        assert [v for v in "abcdefg" if spill.has(Table.GONE, v)] == ["b", "d", "f"]  # the first two written mid-merge
        spill.clear(Table.GONE)
        assert not spill.has(Table.GONE, "b") and spill.has(Table.MARKED, "b")
    finally:
        spill.close()
