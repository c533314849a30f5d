"""Records are bounded by kind: the writer never makes one past its kind's limit, and a
reader refuses a header that claims more before decompressing a byte."""

from __future__ import annotations

import hashlib
import os

import msgspec
import pytest
import zstandard

from conftest import Audit
from journal.cli.app import EXIT_FALLBACK
from journal.errors import CorruptObject, RecordTooLarge
from journal.format.model import Page, TreeRoot
from journal.format import objects
from journal.format.objects import (RECORD_VERSION, HEADER, KIND_CHUNK, KIND_NAMES, KIND_SEGMENT, MAGIC, PROBE_SLICE,
                                    PROBE_SLICES, RAW_LIMITS, decode_record, encode_record)
from journal.verify import CORRUPT_OBJECT, CORRUPT_PAGE


def crafted_chunk(size: int, *, true_id: bool) -> tuple[str, bytes, int]:
    """A chunk record of ``size`` zero bytes, compressed as a stream (a few KB for any
    size), with the header a hostile writer would give it."""
    cctx = zstandard.ZstdCompressor(level=1).compressobj(size=size)
    block, frame, digest = bytes(16 << 20), [], hashlib.sha256()
    for offset in range(0, size, len(block)):
        piece = block[:size - offset]
        frame.append(cctx.compress(piece))
        if true_id:
            digest.update(piece)
    frame = b"".join(frame) + cctx.flush()
    blob_id = digest.digest() if true_id else hashlib.sha256(b"claimed").digest()
    return blob_id.hex(), HEADER.pack(MAGIC, RECORD_VERSION, KIND_CHUNK, 0, size, len(frame), blob_id) + frame, size


@pytest.fixture
def stored(live):
    """Checkpoint 1 of the fixture trees and a config file: the good copies a restore falls back to."""
    (live.local / "codex-home" / "config.toml").write_text('model = "gpt-5.3-codex"\n')
    live.checkpoint()
    return live


def test_a_small_chunk_that_decompresses_to_2_gib_is_refused_before_decompressing(stored, make_live):
    """65 KB on disk, 2 GiB decompressed: no reference may name a blob that large, so
    its page is refused as soon as it is read, and no frame is decompressed."""
    blob_id, record, size = crafted_chunk(2 << 30, true_id=False)
    assert len(record) < 100_000
    (ref,) = stored.put_records([(blob_id, record, size)])
    entry = msgspec.structs.replace(stored.chunk_entry("config.toml"), refs=(ref,), size=size)
    (root,) = stored.put_pages(Page(level=0, entries=(entry,)))
    stored.publish({"codex": TreeRoot(root=root, files=1, bytes=size)})

    Audit(stored, make_live).assert_falls_back(CORRUPT_PAGE, "Expected `int` <= 268435456")


def test_a_chunk_over_the_chunk_limit_is_a_damaged_blob(stored, make_live):
    """A 2 MiB chunk (its id true, its reference consistent): the writer cuts chunks at
    1 MiB, so the reader refuses it, and the file falls back to its older copy."""
    blob_id, record, size = crafted_chunk(2 << 20, true_id=True)
    (ref,) = stored.put_records([(blob_id, record, size)])
    entry = msgspec.structs.replace(stored.chunk_entry("config.toml"), refs=(ref,), size=size)
    stored.publish({"codex": TreeRoot(root=stored.put_tree([entry]), files=1, bytes=size)})

    audit = Audit(stored, make_live)

    assert audit.verify.returncode == 1
    assert [(f["kind"], f["manifest"]) for f in audit.findings] == [(CORRUPT_OBJECT, 2)]
    assert "a chunk record claims 2,097,152 bytes, over the 1,048,576 a chunk may hold" in audit.findings[0]["detail"]
    assert audit.restore.returncode == EXIT_FALLBACK, audit.restore.stdout + audit.restore.stderr
    assert "codex/config.toml: restored from manifest 1" in audit.restore.stderr
    assert (audit.fresh.local / "codex-home" / "config.toml").read_bytes() == \
        (stored.local / "codex-home" / "config.toml").read_bytes()
    assert audit.gc.returncode == 0  # a data blob: gc knows which pack it is in


@pytest.mark.parametrize("kind", sorted(KIND_NAMES))
def test_the_writer_never_makes_a_record_a_reader_refuses(kind):
    limit = RAW_LIMITS[kind]
    with pytest.raises(RecordTooLarge, match=f"over the {limit:,} bytes a {KIND_NAMES[kind]} may hold"):
        encode_record(kind, bytes(limit + 1))
    header = HEADER.pack(MAGIC, RECORD_VERSION, kind, 0, limit + 1, 0, bytes(32))
    with pytest.raises(CorruptObject, match=f"claims {limit + 1:,} bytes, over the {limit:,}"):
        decode_record(header, key="k")


class CountingCompressor:
    """The thread's compressor, counting the bytes given to it."""

    def __init__(self, cctx):
        self.cctx, self.fed = cctx, []

    def compress(self, data):
        self.fed.append(len(data))
        return self.cctx.compress(data)


@pytest.fixture
def compressor(monkeypatch):
    counting = CountingCompressor(zstandard.ZstdCompressor(level=objects.COMPRESSION_LEVEL))
    monkeypatch.setattr(objects, "_compressor", lambda: counting)
    return counting


@pytest.mark.parametrize("size", [1 << 20, (1 << 20) - 5, 200_000, 128 << 10, (256 << 10) + 1, 3 * (128 << 10) + 7])
def test_an_incompressible_chunk_is_stored_as_zstd_would_without_compressing_it(compressor, size):
    """A chunk whose probe does not compress is framed as raw blocks: the very bytes
    zstd writes for it, at the cost of the probe (1/16 of it) instead of a pass of the
    compressor over all of it."""
    payload = os.urandom(size)

    blob_id, record = encode_record(KIND_CHUNK, payload)

    assert record[HEADER.size:] == zstandard.ZstdCompressor(level=objects.COMPRESSION_LEVEL).compress(payload)
    assert compressor.fed == [PROBE_SLICES * PROBE_SLICE]
    assert decode_record(record, key="k", expect_id=blob_id) == payload


def test_a_chunk_the_probe_finds_compressible_is_compressed_whole(compressor):
    """Random bytes with text in one of the probe's slices: the whole chunk goes to the
    compressor, and the record is as small as before the probe."""
    payload = bytearray(os.urandom(1 << 20))
    text = b"".join(b"line %d of a log\n" % i for i in range(8000))[:1 << 17]
    payload[5 << 17:6 << 17] = text
    payload = bytes(payload)

    blob_id, record = encode_record(KIND_CHUNK, payload)

    assert compressor.fed == [PROBE_SLICES * PROBE_SLICE, 1 << 20]
    assert record[HEADER.size:] == zstandard.ZstdCompressor(level=objects.COMPRESSION_LEVEL).compress(payload)
    assert len(record) < len(payload) - 100_000
    assert decode_record(record, key="k", expect_id=blob_id) == payload


def test_only_chunks_are_probed(compressor):
    """A segment (text, compressible) is compressed as it was, with no probe."""
    payload = os.urandom(1 << 20)

    encode_record(KIND_SEGMENT, payload)

    assert compressor.fed == [1 << 20]


def test_a_raw_block_chunk_comes_back_as_views_of_its_record_hashed_never_copied():
    """``decode_record(pieces=True)``: a chunk stored as raw blocks is verified and handed
    over as views of the record read (no byte copied); a damaged block is refused; a
    compressed chunk is decompressed as before."""
    payload = os.urandom(3 * objects.RAW_BLOCK + 1000)
    blob, record = objects.encode_record(KIND_CHUNK, payload)
    blocks = objects.decode_record(record, key="k", expect_id=blob, expect_size=len(payload), pieces=True)
    assert isinstance(blocks, list) and len(blocks) == 4
    assert all(isinstance(b, memoryview) and b.obj is record for b in blocks)
    assert b"".join(blocks) == payload
    damaged = bytearray(record)
    damaged[-1] ^= 1
    with pytest.raises(CorruptObject, match="hash mismatch"):
        objects.decode_record(bytes(damaged), key="k", expect_id=blob, pieces=True)
    text = b"the same line again\n" * 20000
    blob, record = objects.encode_record(KIND_CHUNK, text)
    assert objects.decode_record(record, key="k", expect_id=blob, pieces=True) == text


def test_only_a_whole_frame_of_raw_blocks_is_taken_as_blocks():
    """A frame whose size, block type or end does not match what ``_raw_frame`` writes
    is left to zstd (which checks it)."""
    body = b"".join(objects._raw_frame(memoryview(os.urandom(300_000))))
    assert objects.raw_blocks(body, 300_000) is not None
    assert objects.raw_blocks(body, 299_999) is None
    assert objects.raw_blocks(body[:-1], 300_000) is None
    assert objects.raw_blocks(body + b"x", 300_000) is None
    compressed = bytearray(body)
    compressed[9] |= 4  # the first block's type: compressed
    assert objects.raw_blocks(bytes(compressed), 300_000) is None
