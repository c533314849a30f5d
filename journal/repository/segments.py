"""Reading an entry's blobs back, verified, in order: file chunks (whole, or deltas of a
base chunk) and JSONL segments (whole, or deltas of their anchor: ``format/segments.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from ..format.codec import PLAIN, Codec
from .fetch import RawReader, fetch_in_order
from ..format.model import KIND_FILE, KIND_JSONL, BlobRef, Entry
from ..heap import keep_freed
from ..format.objects import KIND_CHUNK, KIND_SEGMENT, decode_record
from ..format.segments import DICT_TAIL, anchors
from .repository import Repository, blob_location

#: A file of whole chunks this large is verified in the fetch threads (``read_blobs``).
AHEAD_BYTES = 8 << 20


def decode_blobs(entry: Entry, records: Iterable[bytes], read_base: Callable[[BlobRef], bytes] | None = None,
                 start: int = 0, read_anchor: Callable[[BlobRef], bytes] | None = None,
                 codec: Codec = PLAIN) -> Iterator[bytes]:
    """Verify an entry's records (as read, opened in an encrypted store: ``codec`` is the
    store's; in ref order, from ``refs[start]`` on) and yield their payloads. A file's
    delta chunk is decoded against its base,
    ``read_base(ref)``; a transcript read from a later segment than the first needs the
    anchor before it, ``read_anchor(ref)``, when the segment there is a delta."""
    base_of = anchors([r.size for r in entry.refs]) if entry.kind == KIND_JSONL else None
    kind = KIND_SEGMENT if entry.kind == KIND_JSONL else KIND_CHUNK
    bases = entry.bases  # aligned with the refs, or empty (checked when its page was read)
    tail = None
    if base_of is not None and start < len(base_of) and base_of[start] is not None and read_anchor is not None:
        tail = read_anchor(entry.refs[base_of[start]])[-DICT_TAIL:]
    for i, (ref, data) in enumerate(zip(entry.refs[start:], records), start):
        anchor = None if base_of is None else base_of[i]
        base = None if anchor is None else tail
        if bases and bases[i] is not None and read_base is not None:
            base = read_base(bases[i])
        payload = decode_record(data, key=blob_location(ref), expect_id=ref.id, expect_kind=kind,
                                expect_size=ref.size, base=base, codec=codec)
        if base_of is not None and anchor is None:
            tail = payload[-DICT_TAIL:]
        yield payload


def read_blobs(entry: Entry, repo: Repository, start: int = 0, pieces: bool = False) -> Iterator[bytes | list]:
    """Every blob of ``entry`` (from ``refs[start]`` on: a transcript's anchor before it is
    read too, when needed), fetched ahead (``repository/fetch.py``), verified, in order.
    ``pieces``: a whole chunk stored as raw blocks may come as the list of its blocks
    (``decode_record``), for a writer that takes them as they are (``os.writev``).

    A file of at least ``AHEAD_BYTES`` stored as whole chunks is read *and verified* in
    the fetch threads, even from a store on a local disk: its SHA-256 and zstd work then
    runs on a second core while the caller writes what came before."""
    if entry.kind == KIND_FILE and not entry.bases and entry.size >= AHEAD_BYTES:
        keep_freed()
        return fetch_in_order(entry.refs[start:], WholeChunks(repo, pieces), ahead=True)
    return decode_blobs(entry, fetch_in_order(entry.refs[start:], RawReader(repo)), chunk_reader(repo), start,
                        lambda ref: repo.read_blob(ref, KIND_SEGMENT), repo.codec)


class WholeChunks:
    """A ``fetch.BlobReader`` of whole file chunks: each record of a run is verified as
    ``decode_blobs`` verifies a chunk (its id, kind and size), in the thread that read it."""

    read_ahead = True

    def __init__(self, repo: Repository, pieces: bool = False):
        self.repo = repo
        self.pieces = pieces

    def read_run(self, refs: list[BlobRef]) -> list:
        records = self.repo.read_records(refs)
        return [decode_record(data, key=blob_location(ref), expect_id=ref.id, expect_kind=KIND_CHUNK,
                              expect_size=ref.size, codec=self.repo.codec, pieces=self.pieces)
                for ref, data in zip(refs, records)]


def chunk_reader(repo: Repository) -> Callable[[BlobRef], bytes]:
    """Reads a delta chunk's base: a whole chunk, verified (a delta is refused)."""
    return lambda ref: repo.read_whole(ref, KIND_CHUNK)


def read_segment(repo: Repository, ref: BlobRef, anchor: BlobRef | None) -> bytes:
    """One segment on its own: a delta is decoded against its anchor, read and verified too."""
    base = None if anchor is None else repo.read_blob(anchor, KIND_SEGMENT)[-DICT_TAIL:]
    return decode_record(repo.read_record(ref), key=blob_location(ref), expect_id=ref.id, expect_kind=KIND_SEGMENT,
                         expect_size=ref.size, base=base, codec=repo.codec)
