"""How journal's memory is managed where the defaults cost time: large buffers, and the
cycle collector over a large tree.

Large files stream through buffers of about a MiB: keep freed ones mapped for the next.

A large file's capture and restore pass every byte through fresh buffers of a MiB or
a few (chunks, records, runs of records). glibc's malloc hands such memory back to the
kernel as soon as it is freed (it trims the top of the heap, or the buffer had a
mapping of its own), so every buffer was faulted in anew: ~160,000 page faults for a
512 MiB checkpoint, nearly half of its CPU time. ``keep_freed`` raises both thresholds
once per process, so those buffers are reused: allocations up to ``MMAP_THRESHOLD``
come from the heap, and up to ``TRIM_THRESHOLD`` of free memory stays mapped (per
malloc arena). Elsewhere (no glibc ``mallopt``) it does nothing.

A checkpoint or a restore of a large tree allocates tens of thousands of objects
(entries, states, index pages), and CPython's cycle collector runs every 700
allocations, traversing what is tracked: a one-change tick of a 20,000-file tree ran
~150 collections. Nearly all of what a tick allocates is freed by reference counting;
``cycles_paused`` suspends the collector for one operation and restores it after, so
the few cycles made meanwhile (exceptions and their tracebacks) are collected at the
next collection after it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 32 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # mallopt parameters (malloc.h)
_tuned = False


def keep_freed() -> None:
    """Tune malloc for streaming large files (see the module docstring); once per process."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


@contextlib.contextmanager
def cycles_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (see the module docstring); the
    collector's previous state is restored after it, whatever the block raised."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
