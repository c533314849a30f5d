"""Sparse files: where a live file's holes are, and which chunks are all zeros (design §6, "Holes").

* A checkpoint asks a file that may have holes (fewer blocks allocated than its size
  needs) where its data is (``SEEK_DATA``/``SEEK_HOLE``), once, before it reads it. A
  chunk wholly in a hole reads as zeros: it is stored as the zero chunk without a read.
* A restore leaves every whole zero chunk (``CHUNK_BYTES`` of zeros, told by its id:
  ``zero_chunk_id``) unwritten in the new file, and sets the file's size at the end:
  those chunks are holes again, whether or not they were holes in the live file.
"""

from __future__ import annotations

import bisect
import errno
import functools
import os

from ..format.codec import Codec
from ..format.objects import CHUNK_BYTES

#: ``CHUNK_BYTES`` of zeros: a hole's chunk, never read from the file.
ZERO_CHUNK = bytes(CHUNK_BYTES)


@functools.lru_cache(maxsize=4)
def zero_chunk_id(codec: Codec) -> str:
    """The id (as ``codec`` makes ids) of a whole chunk of zeros; hashed once per codec."""
    return codec.id(ZERO_CHUNK)


class DataMap:
    """Where a file's data is, as ``SEEK_DATA``/``SEEK_HOLE`` told when it was made:
    ``holds_data(offset, n)`` is False only for a range wholly inside a hole."""

    def __init__(self, ranges: list[tuple[int, int]]):
        self._starts = [start for start, _ in ranges]
        self._ends = [end for _, end in ranges]

    def holds_data(self, offset: int, n: int) -> bool:
        """Whether any byte of ``[offset, offset + n)`` is in a data range."""
        i = bisect.bisect_right(self._ends, offset)   # the first range ending after ``offset``
        return i < len(self._starts) and self._starts[i] < offset + n


def data_map(fd: int, st: os.stat_result) -> DataMap | None:
    """The data ranges of the regular file ``fd`` (``st``: its ``fstat``), or None when
    it has no hole to skip: every block allocated, or a filesystem that cannot tell
    (``SEEK_DATA`` refused). Moves the file offset (readers use ``pread``)."""
    if st.st_blocks * 512 >= st.st_size or not hasattr(os, "SEEK_DATA"):
        return None
    ranges: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < st.st_size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as err:
                if err.errno == errno.ENXIO:
                    break   # no data past ``pos``: a hole to the end
                raise
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            ranges.append((start, pos))
    except OSError as err:
        if err.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return None   # this filesystem cannot say: every chunk is read
        raise
    return DataMap(ranges)
