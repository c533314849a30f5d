"""A pack copied as it is (``Mode.SAME``), verified on the way.

A pack's name is the SHA-256 of its bytes as stored (sealed, in an encrypted store), so
its bytes are checked against its name: read from the source in ranged pieces into a
spool file (the memory a copy holds stays bounded whatever the pack's size), hashed as
they come, and published only when they hash to the name (``put_file_if_absent``: a
local target links the spool file in). A pack whose bytes do not is ``CorruptObject``,
naming its key; nothing of it reaches the target.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid

from ..atomic import makedirs
from ..errors import CorruptObject, ObjectNotFound
from ..paths import PRIVATE_DIR, PRIVATE_FILE
from ..repository.repository import pack_key
from ..store.base import Store
from .sink import Sink

#: Bytes read from the source per request.
PIECE = 8 << 20
#: A spool file older than this was left by a copy that was killed: removed by the next.
STALE_SECONDS = 3600


def copy_pack(source: Store, sink: Sink, pack: str, spool_dir: str) -> None:
    """Copy pack ``pack`` from ``source`` through ``sink``, verified; ``CorruptObject``
    (its bytes do not hash to its name) or ``ObjectNotFound``."""
    key = pack_key(pack)
    makedirs(spool_dir, PRIVATE_DIR)
    path = os.path.join(spool_dir, f"{uuid.uuid4().hex}.pack")
    try:
        digest = _spool(source, key, path)
        if digest != pack:
            raise CorruptObject(key, f"its bytes hash to {digest[:12]}..., not to its name")
        sink.put_file_if_absent(key, path)
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _spool(source: Store, key: str, path: str) -> str:
    """Write the object ``key`` to the new file ``path``, piece by piece; its SHA-256."""
    hasher = hashlib.sha256()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    with open(fd, "wb") as out:
        offset = 0
        while True:
            piece = source.get(key, offset, offset + PIECE)
            if not piece:
                if offset == 0 and source.head(key) is None:
                    raise ObjectNotFound(key)
                break
            hasher.update(piece)
            out.write(piece)
            offset += len(piece)
            if len(piece) < PIECE:
                break
    return hasher.hexdigest()


def sweep_spool(spool_dir: str) -> None:
    """Remove the spool files a killed copy left (older than ``STALE_SECONDS``; a copy
    running now keeps its own)."""
    try:
        names = os.listdir(spool_dir)
    except FileNotFoundError:
        return
    cutoff = time.time() - STALE_SECONDS
    for name in names:
        path = os.path.join(spool_dir, name)
        try:
            if name.endswith(".pack") and os.lstat(path).st_mtime < cutoff:
                os.unlink(path)
        except FileNotFoundError:
            pass
