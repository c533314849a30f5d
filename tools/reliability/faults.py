"""Store faults, and a hook that SIGKILLs this process at its Nth filesystem call.

A fault is a string, so a trial can print it and a replay parse it back:

* ``enospc@N``: the Nth ``write`` of a store object fails with ENOSPC (a full volume);
* ``eio@N``: the Nth ``write`` fails with EIO; ``eio-fsync@N``: the Nth ``fsync`` does;
* ``short@N``: the Nth ``write`` writes half of what it was given and says so (a legal
  short write: the caller must write the rest);
* ``landed@N``: the Nth put lands whole, then reports a failure (a lost response);
* ``put@N``: the Nth put fails before anything is written (a refused request).

The first four go through the ``FsOps`` seam of a directory store (``LocalStore.fs``,
also hf-mount's rules in ``HfMountSimStore``); the last two wrap any ``Store``.

``KillHook`` counts the calls of this process that change a file system (``os.open``
for writing, ``write``, ``fsync``, ``rename``, ``unlink``, ``mkdir``, ``chmod`` ...,
``open()`` for writing, and the ``renameat2`` journal makes through ctypes) and sends
the process SIGKILL just before call ``at``. It patches the ``os`` module's functions
and ``builtins.open``, which journal looks up at each call; no ``LD_PRELOAD``, and
SQLite's own writes (C code) are not counted. Calls from several threads (pack
uploads, restore's writers) are counted in the order they happen.
"""

from __future__ import annotations

import builtins
import errno
import itertools
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence

from journal.errors import StoreError
from journal.store import open_store
from journal.store.base import Store
from journal.store.wrapper import StoreWrapper
from journal.store.local import LocalStore

FS_FAULTS = ("enospc", "eio", "eio-fsync", "short")
PUT_FAULTS = ("landed", "put")
FAULTS = FS_FAULTS + PUT_FAULTS


def parse_fault(spec: str) -> tuple[str, int]:
    """``kind@N`` -> ``(kind, N)``; ValueError for anything else."""
    kind, _, n = spec.partition("@")
    if kind not in FAULTS or not n.isdigit() or int(n) < 1:
        raise ValueError(f"fault {spec!r}: expected one of {', '.join(FAULTS)} then @N (N >= 1)")
    return kind, int(n)


class FaultFs:
    """An ``FsOps`` (``inner``) whose Nth ``write`` or ``fsync`` fails as ``kind`` says;
    every other call, and every other attribute, is the inner one's."""

    def __init__(self, inner, kind: str, n: int):
        self.inner = inner
        self.kind = kind
        self.n = n
        self.writes = 0
        self.fsyncs = 0
        self.fired = False
        self._lock = threading.Lock()

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def _hit(self, counter: str, kinds: tuple[str, ...]) -> bool:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)
            hit = self.kind in kinds and getattr(self, counter) == self.n
            self.fired = self.fired or hit
        return hit

    def write(self, fd, data: memoryview) -> int:
        if self._hit("writes", ("enospc", "eio", "short")):
            if self.kind == "short" and len(data) > 1:
                return self.inner.write(fd, data[:len(data) // 2])
            if self.kind != "short":
                code = errno.ENOSPC if self.kind == "enospc" else errno.EIO
                raise OSError(code, os.strerror(code))
        return self.inner.write(fd, data)

    def fsync(self, fd) -> None:
        if self._hit("fsyncs", ("eio-fsync",)):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.inner.fsync(fd)


class PutFault(StoreWrapper):
    """``inner`` whose Nth ``put_if_absent`` fails: before writing (``put``) or after its
    bytes landed (``landed``). Every other put goes through that one, as the base
    ``Store`` makes them; everything else is the inner store's."""

    put_file_if_absent = Store.put_file_if_absent
    put_first_absent = Store.put_first_absent
    stage = Store.stage

    def __init__(self, inner: Store, kind: str, n: int):
        super().__init__(inner)
        self.kind = kind
        self.n = n
        self.puts_seen = 0
        self.fired = False
        self._lock = threading.Lock()

    def __getattr__(self, name: str):   # what only the inner backend has (a local store's root)
        return getattr(self.inner, name)

    def put_if_absent(self, key: str, data) -> None:
        with self._lock:
            self.puts_seen += 1
            hit = self.puts_seen == self.n
            self.fired = self.fired or hit
        if hit and self.kind == "put":
            raise StoreError(f"put object: {key}: injected failure before any byte was written")
        self.inner.put_if_absent(key, data)
        if hit:
            raise StoreError(f"put object: {key}: injected failure after the object landed (a lost response)")


def open_faulty(url: str, fault: str | None) -> Store:
    """The store at ``url`` with ``fault`` injected (None: as it is)."""
    store = open_store(url)
    if fault is None:
        return store
    kind, n = parse_fault(fault)
    if kind in PUT_FAULTS:
        return PutFault(store, kind, n)
    if not isinstance(store, LocalStore):
        raise ValueError(f"fault {fault!r} needs a directory store (it goes through FsOps), not {url}")
    store.fs = FaultFs(store.fs, kind, n)
    return store


def fired(store: Store) -> bool:
    """Whether the fault injected into ``store`` (``open_faulty``) was hit."""
    if isinstance(store, PutFault):
        return store.fired
    fs = getattr(store, "fs", None)
    return isinstance(fs, FaultFs) and fs.fired


# --- the kill hook -------------------------------------------------------------------

#: ``os`` functions that change a file system (``open`` only with a writing flag).
MUTATING = ("open", "write", "pwrite", "fsync", "fdatasync", "replace", "rename", "unlink", "remove", "mkdir",
            "rmdir", "ftruncate", "truncate", "fchmod", "chmod", "utime", "symlink", "link")
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class KillHook:
    """Count this process's file-system-changing calls; SIGKILL it just before call
    ``at`` (``None``: only count). ``install`` patches, ``remove`` puts things back."""

    def __init__(self, at: int | None = None):
        self.at = at
        self._calls = itertools.count(1)
        self.count = 0
        self._saved: list[tuple[object, str, object]] = []

    def _tick(self) -> None:
        n = next(self._calls)
        self.count = n
        if n == self.at:
            os.kill(os.getpid(), signal.SIGKILL)

    def _wrap(self, real, counts: Callable[..., bool] | None = None):
        def hooked(*args, **kwargs):
            if counts is None or counts(*args, **kwargs):
                self._tick()
            return real(*args, **kwargs)
        return hooked

    def _patch(self, owner, name: str, counts=None) -> None:
        real = getattr(owner, name)
        self._saved.append((owner, name, real))
        setattr(owner, name, self._wrap(real, counts))

    def install(self) -> KillHook:
        import journal.atomic

        for name in MUTATING:
            if name == "open":
                self._patch(os, name, lambda path, flags, *a, **k: bool(flags & _WRITING))
            elif hasattr(os, name):
                self._patch(os, name)
        self._patch(builtins, "open",
                    lambda file, mode="r", *a, **k: isinstance(file, (str, bytes, os.PathLike))
                    and any(c in mode for c in "wax+"))
        self._patch(journal.atomic, "_renameat2_noreplace")
        return self

    def remove(self) -> None:
        for owner, name, real in reversed(self._saved):
            setattr(owner, name, real)
        self._saved.clear()
