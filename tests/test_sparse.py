"""Sparse files (design §6, "Holes"): a checkpoint reads only their data, a restore
leaves their holes unwritten. A 2 GiB file holding a few bytes is the example: read
in full it costs seconds of hashing, and restored in full 2 GiB of disk."""

from __future__ import annotations

import hashlib
import os

import pytest

from conftest import CodexLive

MiB, GiB = 1 << 20, 1 << 30
#: Where the few bytes of data sit: 1 GiB in, in the middle of a chunk.
DATA_AT, DATA = GiB + 12345, b"the only bytes that are not a hole\n"


def bytes_read() -> int:
    """Bytes this process (every thread) has read through ``read``/``pread`` so far."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


def data_ranges(path) -> list[tuple[int, int]]:
    """The file's data ranges, as ``SEEK_DATA``/``SEEK_HOLE`` give them."""
    out, pos = [], 0
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, pos))
    finally:
        os.close(fd)
    return out


def digest(path, start: int, length: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(start)
        return hashlib.sha256(fh.read(length)).hexdigest()


@pytest.fixture
def sparse(root) -> CodexLive:
    """A Codex home holding ``disk.img``: 2 GiB, all of it a hole but ``DATA``."""
    live = CodexLive(root)
    path = live.write("disk.img", b"")
    with open(path, "r+b") as fh:
        fh.truncate(2 * GiB)
        fh.seek(DATA_AT)
        fh.write(DATA)
    if os.stat(path).st_blocks * 512 > 16 * MiB:
        pytest.skip("this filesystem keeps no holes")
    return live


def test_a_sparse_file_is_checkpointed_reading_only_its_data(sparse):
    before = bytes_read()
    result = sparse.checkpoint()
    read = bytes_read() - before

    assert result.seq == 1 and not result.warnings
    assert read < 64 * MiB, f"read {read:,} bytes of a file holding {len(DATA)}"
    assert result.blobs <= 4   # the zero chunk once, the data chunk, the index page
    entry = sparse.entries("codex")["disk.img"]
    assert entry.size == 2 * GiB and len(entry.refs) == 2048
    assert len({ref.id for ref in entry.refs}) == 2
    chunk = sparse.repo().read_blob(entry.refs[GiB // MiB])
    assert chunk[DATA_AT - GiB:DATA_AT - GiB + len(DATA)] == DATA


def test_a_sparse_file_restores_with_its_holes_unwritten(sparse, root):
    sparse.checkpoint()
    live = sparse.codex / "disk.img"
    out = root / "out"

    sparse.restore(to=str(out))
    live.unlink()
    sparse.restore()   # a hot restore writes the missing file the same way

    for got in (out / "codex" / "disk.img", live):
        st = os.stat(got)
        assert st.st_size == 2 * GiB
        assert st.st_blocks * 512 <= 2 * MiB, f"{got}: {st.st_blocks * 512:,} bytes allocated"
        ranges = data_ranges(got)
        assert ranges and ranges[0][0] >= GiB and ranges[-1][1] <= GiB + MiB, ranges
        assert digest(got, GiB, MiB) == hashlib.sha256(bytes(DATA_AT - GiB) + DATA +
                                                       bytes(GiB + MiB - DATA_AT - len(DATA))).hexdigest()
        assert digest(got, 2 * GiB - MiB, MiB) == hashlib.sha256(bytes(MiB)).hexdigest()


def test_an_encrypted_stores_sparse_file_restores_with_its_holes_too(root):
    """Its chunks' ids are keyed: a whole chunk of zeros is told by the store's own id of it."""
    pytest.importorskip("cryptography")
    key = root / "store.key"
    live = CodexLive(root, env={"JOURNAL_KEY_FILE": str(key)})
    live.run("init", "--encrypt", "--key-file", str(key), expect=0)
    path = live.write("disk.img", b"")
    with open(path, "r+b") as fh:
        fh.truncate(64 * MiB)
        fh.seek(40 * MiB)
        fh.write(DATA)
    live.run("checkpoint", expect=0)
    out = root / "out"

    live.run("restore", "--to", str(out), expect=0)

    got = out / "codex" / "disk.img"
    assert got.read_bytes() == path.read_bytes()
    assert os.stat(got).st_blocks * 512 <= 2 * MiB
    assert data_ranges(got) == [(40 * MiB, 41 * MiB)]
