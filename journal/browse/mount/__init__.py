"""``journal mount DIR``: every checkpoint of a store as a read-only file system
(docs/design.md §19, "mount").

``layout`` says what each path is (``latest``, ``seq/N``, ``time/TIME``, ``forks/N``)
from manifests and index pages read through one ``View``; ``files`` reads an open
file's bytes from the packs, verified, through a bounded cache, and rebuilds a database
once into a private temp file; ``fs`` answers FUSE's calls with them, turning damage
into EIO for that one file; ``serve`` checks the mount point and runs the mount until
it is unmounted. Memory is bounded by ``Limits``, not by the number of checkpoints.
"""

from __future__ import annotations

from .serve import Limits, check_mountpoint, serve

__all__ = ["Limits", "check_mountpoint", "serve"]
