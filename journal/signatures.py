"""Change signatures: what decides whether a live path must be read again.

Kept free of heavy imports: the console entry point (``cli/launch.py``) uses them to answer
an idle ``journal checkpoint`` before importing the rest of journal.
"""

from __future__ import annotations

import os


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """A file's or link's signature, from its ``lstat``."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)


def dir_signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """A directory's signature: its mode only (its listing is what the walk compares)."""
    return (0, 0, 0, st.st_mode)


def live_signature(path: str) -> tuple[int, int, int, int]:
    """The change signature of a live database: the size and mtime of it and its WAL."""
    from .paths import blake2b

    st = os.stat(path)
    try:
        with open(path + "-wal", "rb") as fh:
            wal = os.fstat(fh.fileno())
            # The WAL header's checkpoint sequence and salts change when the WAL is
            # reset and rewritten from its start at the same size.
            salts = fh.read(24)[12:24]
        stamp = blake2b(wal.st_mtime_ns.to_bytes(8, "big") + salts, digest_size=7).digest()
        wal_sig = (wal.st_size, int.from_bytes(stamp, "big"))
    except FileNotFoundError:
        wal_sig = (0, 0)
    return (st.st_size, st.st_mtime_ns) + wal_sig
