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

A long-lived process gives the freed memory back between operations.

``journal supervise`` runs a tick every few seconds for weeks. What a tick frees stays
with malloc (the thresholds above), and glibc gives each thread that allocates while
another holds the lock an arena of its own, up to eight per core: the backup, encoding
and upload threads of the ticks spread their buffers over several arenas, each keeping
its free memory and its fragments. Under the supervisor's loop the RSS grew by about
2 KiB a tick (49 to 61 MiB over 9,000 ticks of the history bench, the Python heap
flat). ``one_arena`` (called once, before the threads start) keeps every thread in the
main arena, and ``release_freed`` (after each tick) returns its free pages to the kernel:
the RSS then stays where the first tick left it. Within a tick the buffers are still
reused.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 32 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8   # mallopt parameters (malloc.h)
_tuned = False


def keep_freed() -> None:
    """Tune malloc for streaming large files (see the module docstring); once per process."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    _libc_call("mallopt", _M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    _libc_call("mallopt", _M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def one_arena() -> None:
    """Make every thread allocate from malloc's main arena (see the module docstring);
    once, in a long-lived process, before it starts threads. Without glibc, nothing."""
    _libc_call("mallopt", _M_ARENA_MAX, 1)


def release_freed() -> None:
    """Give the free memory of every malloc arena back to the kernel (glibc's
    ``malloc_trim(0)``: whole free pages anywhere in the heap, not only at its top).
    Without glibc, nothing."""
    _libc_call("malloc_trim", 0)


def _libc_call(name: str, *args: int) -> None:
    import ctypes

    from .atomic import _c_library

    try:
        func = getattr(_c_library(), name)   # the one handle, opened once (after every supervisor tick)
    except (OSError, AttributeError):
        return
    func.argtypes = (ctypes.c_int,) * len(args)
    func(*args)


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
