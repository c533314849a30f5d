"""A snapshot's page ids (``sqlite/capture._page_ids``) against the obvious rule, page
by page: a page whose bytes equal the base copy's page of the same number, where the
base copy's record knows that page to be the full map's, has no id (None: the full
map's is taken); every other page is hashed. The function compares both copies through
memory maps, a block, then a span of pages, then a page at a time; these cases put
differences at each of those levels, at the edges of blocks and spans, with a base copy
shorter or longer than the copy and pages the record says may differ."""

from __future__ import annotations

import hashlib
import random

import pytest

from journal.format.codec import PLAIN
from journal.sqlite import capture
from journal.sqlite.base_copy import SamePages

PAGE = 1024


def _db_bytes(rng: random.Random, pages: int) -> bytearray:
    data = bytearray(rng.randbytes(pages * PAGE))
    data[16:18] = PAGE.to_bytes(2, "big")   # the header's page size, which both copies must agree on
    return data


def _expected(copy: bytes, base: bytes, differs: list[int]) -> list[str | None]:
    out = []
    for pgno in range(len(copy) // PAGE):
        page = copy[pgno * PAGE:(pgno + 1) * PAGE]
        same = base[pgno * PAGE:(pgno + 1) * PAGE] == page and pgno not in differs
        out.append(None if same else hashlib.sha256(page).hexdigest())
    return out


CASES = {
    "identical": (40, 40, [], []),
    "one page changed in the middle of a span": (40, 40, [21], []),
    "first and last page of a block changed": (40, 40, [0, 15, 16, 31, 32], []),
    "a whole span changed": (40, 40, list(range(16, 32)), []),
    "the copy grew past the base copy": (45, 40, [3], []),
    "the base copy is longer than the copy": (30, 40, [7], []),
    "equal bytes the record says may differ": (40, 40, [], [5, 17, 39]),
    "no base copy bytes at all past page 0": (40, 1, [], []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_page_ids_hash_exactly_the_pages_that_differ_from_the_known_base(tmp_path, monkeypatch, case):
    pages, base_pages, changed, differs = CASES[case]
    # Blocks of 16 pages and spans of 4, so each level has several of the other inside it.
    monkeypatch.setattr(capture, "READ_BLOCK", 16 * PAGE)
    monkeypatch.setattr(capture, "SPAN_PAGES", 4)
    rng = random.Random(case)
    base = _db_bytes(rng, base_pages)
    copy = bytearray(base[:pages * PAGE]) + rng.randbytes(max(0, pages - base_pages) * PAGE)
    for pgno in changed:
        copy[pgno * PAGE + 200] ^= 0xFF
    (tmp_path / "copy.db").write_bytes(copy)
    (tmp_path / "base.db").write_bytes(base)

    page_size, ids = capture._page_ids(str(tmp_path / "copy.db"), PLAIN,
                                       SamePages(str(tmp_path / "base.db"), sorted(differs)))

    assert page_size == PAGE
    assert ids == _expected(bytes(copy), bytes(base), differs)
    hashed = sum(i is not None for i in ids)
    assert hashed == len(set(changed) | set(differs) | set(range(min(pages, base_pages), pages)))


def test_page_ids_without_a_base_copy_hash_every_page(tmp_path, monkeypatch):
    monkeypatch.setattr(capture, "READ_BLOCK", 16 * PAGE)
    copy = _db_bytes(random.Random(1), 37)
    (tmp_path / "copy.db").write_bytes(copy)
    page_size, ids = capture._page_ids(str(tmp_path / "copy.db"), PLAIN, None)
    assert page_size == PAGE
    assert ids == [hashlib.sha256(copy[p * PAGE:(p + 1) * PAGE]).hexdigest() for p in range(37)]


def test_a_last_page_cut_short_is_hashed_even_where_the_base_copy_starts_the_same(tmp_path, monkeypatch):
    """A copy whose last page is cut short (SQLite's backup writes whole pages, so only a
    damaged or foreign file) never has that page vouched for by the base copy, at any
    level, even when its bytes are a prefix of the base copy's page: it is hashed."""
    monkeypatch.setattr(capture, "READ_BLOCK", 16 * PAGE)
    monkeypatch.setattr(capture, "SPAN_PAGES", 4)
    base = _db_bytes(random.Random(2), 8)
    for pages in (3, 4, 7):   # the short page inside a span, at a span's end, at the block's end
        copy = bytes(base[:pages * PAGE + 100])
        (tmp_path / "copy.db").write_bytes(copy)
        (tmp_path / "base.db").write_bytes(base)
        _, ids = capture._page_ids(str(tmp_path / "copy.db"), PLAIN, SamePages(str(tmp_path / "base.db"), []))
        assert ids == [None] * pages + [hashlib.sha256(copy[pages * PAGE:]).hexdigest()], pages
