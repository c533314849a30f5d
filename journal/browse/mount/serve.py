"""Mounting: check the mount point, build the file system over a store, serve it until
it is unmounted, and leave nothing behind.

libfuse runs the mount in the foreground, one thread per request, and ends it on
SIGINT, SIGTERM or SIGHUP (unmounting it, lazily when files are still open) or when it
is unmounted from outside (``fusermount -u DIR``); ``serve`` then returns, after the
temp directory of rebuilt databases is removed.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from ...paths import shown
from ...report import SILENT, Reporter
from ...repository.repository import RecordCache, Repository
from ..view import View
from .errors import CannotMount
from .files import Files
from .fs import MountFs
from .layout import Layout
from .lru import Lru


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """What a mount keeps at most: in memory, whatever the number of checkpoints, and on
    disk, the rebuilt databases no handle has open."""

    cache_bytes: int = 64 << 20     # verified file bytes (blob payloads)
    manifests: int = 64
    pages: int = 256                # index pages (64 entries on average, at most 1,024)
    listed: int = 100_000           # directory entries, in the listings kept
    records: int = 8 << 20          # whole page records kept as the bases of page deltas
    db_bytes: int = 1 << 30         # rebuilt databases, on disk


class Once:
    """Passes each warning on once (a damaged file read again is not said again)."""

    def __init__(self, reporter: Reporter):
        self._reporter = reporter
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        with self._lock:
            if message in self._said:
                return
            self._said.add(message)
        self._reporter.warn(message)


class Held(NamedTuple):
    """What a mount keeps in memory, each bounded by its ``Limits`` field."""

    manifests: Lru
    pages: Lru
    records: RecordCache
    listings: Lru
    blobs: Lru


def build_fs(repo: Repository, mountpoint: str, tmp_dir: str, *, limits: Limits = Limits(), refresh: float = 30.0,
             reporter: Reporter = SILENT, ready: Callable[[], None] = lambda: None) -> tuple[MountFs, Held]:
    """The file system over ``repo`` that ``serve`` mounts at ``mountpoint``, rebuilding
    databases in ``tmp_dir`` (a caller may also call its operations itself), and what it
    keeps in memory."""
    warn = Once(reporter)
    manifests, pages, records = Lru(limits.manifests), Lru(limits.pages), RecordCache(limits.records)
    layout = Layout(View(repo, "mount", reporter, manifests=manifests, pages=pages, records=records), limits.listed,
                    refresh, warn)
    files = Files(repo, tmp_dir, limits.cache_bytes, limits.db_bytes)
    return MountFs(layout, files, mountpoint, warn, ready), Held(manifests, pages, records, layout.listings,
                                                                  files.blobs)


def serve(repo: Repository, mountpoint: str, *, limits: Limits = Limits(), refresh: float = 30.0,
          reporter: Reporter = SILENT, ready: Callable[[], None] = lambda: None) -> None:
    """Mount the store at ``mountpoint``, read-only, and serve it until it is unmounted;
    ``ready`` is called once the mount is up. ``refresh``: seconds between two readings
    of the list of checkpoints. ``CannotMount`` when nothing could be mounted."""
    fuse = load_fuse(mountpoint)
    check_mountpoint(mountpoint)
    tmp_dir = tempfile.mkdtemp(prefix="journal-mount-")   # mode 0700: the databases are no one else's to read
    ops, _held = build_fs(repo, mountpoint, tmp_dir, limits=limits, refresh=refresh, reporter=reporter, ready=ready)
    try:
        fuse.FUSE(ops, mountpoint, foreground=True, ro=True, fsname="journal", subtype="journal",
                  kernel_cache=True)
    except RuntimeError as err:  # libfuse said why on stderr
        raise CannotMount(shown(mountpoint), f"FUSE refused the mount (libfuse status {err}); see its message "
                                             "above") from None
    finally:
        ops.files.close()


def load_fuse(mountpoint: str):
    """The mfusepy module; ``CannotMount`` saying what to install when FUSE is missing."""
    if not os.path.exists("/dev/fuse"):
        raise CannotMount(shown(mountpoint), "this machine has no /dev/fuse; load the fuse module (modprobe fuse), "
                                             "or in a container run it with --device /dev/fuse --cap-add SYS_ADMIN")
    try:
        import mfusepy
    except ImportError:
        raise CannotMount(shown(mountpoint), "needs the mfusepy package; pip install 'journal[mount]'") from None
    except OSError:  # mfusepy found no libfuse
        raise CannotMount(shown(mountpoint), "needs libfuse 2 or 3; install it (Debian, Ubuntu: apt-get install "
                                             "fuse3)") from None
    return mfusepy


def check_mountpoint(mountpoint: str) -> None:
    """``CannotMount`` unless ``mountpoint`` is an empty directory that is no mount point."""
    where = shown(mountpoint)
    try:
        st = os.stat(mountpoint)
    except FileNotFoundError:
        raise CannotMount(where, f"no such directory; create it first (mkdir -p {where})") from None
    except OSError as err:  # ENOTCONN: a mount whose process died
        raise CannotMount(where, f"{err.strerror}; if a mount's process died there, `fusermount -u {where}` "
                                 "clears it") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CannotMount(where, "not a directory; name an empty directory to mount on")
    if os.path.ismount(mountpoint):
        raise CannotMount(where, f"already a mount point; unmount it first (fusermount -u {where}) or name another "
                                 "directory")
    if os.listdir(mountpoint):
        raise CannotMount(where, "not empty; name an empty directory to mount on")
