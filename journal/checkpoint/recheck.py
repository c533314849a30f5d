"""Packs a checkpoint found already stored, checked again after its commit (design §16).

A put that finds its pack already stored (same bytes, same name: a crashed attempt, or
identical content) succeeds without uploading, and the spool copy is kept in
``<state_dir>/recheck/`` (``PackWriter.keep_existing``, before the manifest is put, so
a kill after the commit cannot lose it). A gc sweep batch
planned from a pack listing taken before that commit may still delete the pack, so
each checkpoint checks the kept packs again and uploads any that went, for as long as a
gc may be running (it holds the gc lease, ``gc/lease.py``).
"""

from __future__ import annotations

import os
import time

from ..errors import KeyExists
from ..paths import RECHECK_DIR
from ..repository.repository import LEASE_KEY, LEASE_SECONDS, RENEWING_KEY, pack_key
from ..store.base import Store

#: ``gc_running`` answers "no" only when its three looks took less than this: a gc
#: renews its lease at most once per half lease, so one renewal at most falls within.
LOOK_SECONDS = LEASE_SECONDS / 4


def gc_running(store: Store) -> bool:
    """Whether a gc may be running: one holds its lease from before it plans until after
    its last delete, and renews it by putting ``RENEWING_KEY``, deleting the lease, putting
    it again and deleting the marker. So: the lease, then the marker, then the lease
    again (a renewal that ended between the first two looks has put the lease back
    before the third). Three absent looks within ``LOOK_SECONDS``: no gc is running."""
    started = time.monotonic()
    for key in (LEASE_KEY, RENEWING_KEY, LEASE_KEY):
        if store.head(key) is not None:
            return True
    return time.monotonic() - started > LOOK_SECONDS


def recheck_dir(state_dir: str) -> str:
    return os.path.join(state_dir, RECHECK_DIR)


def touch_kept(paths: list[str]) -> None:
    """Stamp kept copies with the commit time: their recheck window counts from it."""
    for path in paths:
        try:
            os.utime(path)
        except FileNotFoundError:  # gone: nothing to stamp
            pass


def rechecks_pending(state_dir: str) -> bool:
    """Whether packs wait for a recheck."""
    try:
        return bool(os.listdir(recheck_dir(state_dir)))
    except FileNotFoundError:
        return False


def recheck_kept(store: Store, keep_dir: str, window: float = LEASE_SECONDS) -> list[str]:
    """HEAD each pack in ``keep_dir`` and upload again any that a gc sweep deleted after
    the commit that named it. A gc holds its lease from before it plans until after its
    last delete, so when no gc is running (``gc_running``) *before* the packs are
    checked, that check is final and the copies are forgotten; otherwise they stay for the next checkpoint, at
    most ``window`` seconds. Returns the packs uploaded again."""
    try:
        names = sorted(os.listdir(keep_dir))
    except FileNotFoundError:
        return []
    if not names:
        return []
    running = gc_running(store)
    again, now = [], time.time()
    for pack in names:
        path = os.path.join(keep_dir, pack)
        if store.head(pack_key(pack)) is None:
            try:
                with open(path, "rb") as src:
                    store.put_if_absent(pack_key(pack), src)
                again.append(pack)
            except KeyExists:
                pass
        if not running or now - os.path.getmtime(path) > window:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    return again
