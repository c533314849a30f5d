"""The page cache as tests see it: how many of a file's pages it holds, and a
directory on a disk whose written pages can be dropped (the suite's own temp dirs are
on tmpfs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

MiB = 1 << 20


def resident_pages(path: Path) -> int:
    """How many of the file's pages are in the page cache (``mincore`` over a mapping)."""
    import ctypes
    import mmap

    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    vec = ctypes.create_string_buffer(pages)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec.raw[:pages])


@pytest.fixture
def disk_dir():
    """A new directory under the system temp dir (a disk, where the suite's own temp
    dirs are on tmpfs), removed at the end; the test is skipped where it is not
    backed by a page cache that drops written pages when told to."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="journal-test-"))
    try:
        probe = path / "probe"
        probe.write_bytes(os.urandom(MiB))
        fd = os.open(probe, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        if resident_pages(probe):
            pytest.skip(f"{path} keeps written pages cached whatever it is advised (tmpfs)")
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
