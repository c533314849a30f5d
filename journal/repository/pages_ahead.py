"""Index pages read ahead: the pages of many trees, a level of every tree at a time.

A tree's walk (``format/index.iter_pages``) reads one page after another. Where each
read waits on a link (``Store.read_ahead``: a bucket, a FUSE mount of one) that is a
round trip per page: a restore of the six trees of the bench's workload made 26 of
them in a row, 0.8 s over a 30 ms link, before it wrote its first file.
``read_pages_ahead`` reads the same pages a level at a time, each level's reads at
once: one round trip per level of the deepest tree (two where a page is a delta,
its base read after it). The walk then takes each page from what was read ahead and
checks it as before; a page that failed here is read again there, and reported.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import JournalError
from ..format.index import child_pages, decode_page, page_key
from ..format.model import BlobRef

#: Reads in flight at once.
READS = 16
#: Payload bytes read ahead at most; the walk reads the pages past them itself.
AHEAD_BYTES = 32 << 20

#: Where a page is stored, as a walk names it: ``(id, pack, offset, length)``.
PageAt = tuple[str, str, int, int]
#: Reads one index page, verified: ``(payload, the base of a delta or None)`` (``Repository.read_page``).
ReadPage = Callable[[BlobRef], tuple[bytes, BlobRef | None]]


def page_at(ref: BlobRef) -> PageAt:
    return ref.id, ref.pack, ref.offset, ref.length


def read_pages_ahead(read_page: ReadPage, roots: list[BlobRef]) -> dict[PageAt, tuple[bytes, BlobRef | None]]:
    """The pages under ``roots`` as ``read_page`` returns them, by place, read a level
    at a time with up to ``READS`` reads at once, until ``AHEAD_BYTES`` are held. A
    page that cannot be read or decoded is left out, and so is what lies under it."""
    from concurrent.futures import ThreadPoolExecutor  # imported here: only a read over a link needs it

    got: dict[PageAt, tuple[bytes, BlobRef | None]] = {}
    held = 0
    level = list({page_at(ref): ref for ref in roots}.values())
    with ThreadPoolExecutor(max_workers=READS, thread_name_prefix="journal-pages") as pool:
        while level and held < AHEAD_BYTES:
            below: dict[PageAt, BlobRef] = {}
            for ref, read in zip(level, pool.map(lambda ref: _try_read(read_page, ref), level)):
                if read is None:
                    continue
                got[page_at(ref)] = read
                held += len(read[0])
                for child, _said in _children(ref, read[0]):
                    if page_at(child) not in got:
                        below[page_at(child)] = child
            level = list(below.values())
    return got


def _try_read(read_page: ReadPage, ref: BlobRef) -> tuple[bytes, BlobRef | None] | None:
    try:
        return read_page(ref)
    except JournalError:  # the walk reads it again, and says what is wrong
        return None


def _children(ref: BlobRef, payload: bytes) -> list:
    try:
        page = decode_page(payload, page_key(ref))
    except JournalError:
        return []
    return child_pages(page, ref, None) if page.level else []
