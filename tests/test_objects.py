"""Records are bounded by kind: the writer never makes one past its kind's limit, and a
reader refuses a header that claims more before decompressing a byte."""

from __future__ import annotations

import hashlib

import msgspec
import pytest
import zstandard

from conftest import Audit
from journal.cli.app import EXIT_FALLBACK
from journal.errors import CorruptObject, RecordTooLarge
from journal.format.model import Page, TreeRoot
from journal.format.objects import (RECORD_VERSION, HEADER, KIND_CHUNK, KIND_NAMES, MAGIC, RAW_LIMITS, decode_record,
                             encode_record)
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
