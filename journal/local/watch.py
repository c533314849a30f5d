"""Watching the trees' directories between ticks, so that an idle tick of a large tree
need not ``lstat`` every path (design §10, "The watch").

`journal supervise` keeps one ``Watch`` for its life. After each checkpoint that saved a
quiet snapshot (``local/quiet.py``), ``settle`` watches every directory the snapshot
lists with inotify. At the next tick, ``trusted`` answers the directories whose rows the
quiet check may take as they are, without listing them or ``lstat``-ing their names: a
directory is trusted only when

* its watch was in place before the previous check of its row began, and no event
  arrived for it since (a name made, written, touched, renamed or removed in it, or the
  directory itself moved or removed); the queue never overflowed;
* the path still names the very directory watched (``lstat``: device and inode), so a
  directory above it renamed, or the tree's root moved, is never trusted;
* the snapshot is the one this watch settled on (another process's checkpoint wrote a
  snapshot: nothing is trusted until it is checked once);
* it is not in this tick's sweep: every tick checks a further sixteenth of the names in
  full (``SWEEP_TICKS``), whatever the events said, so that a change inotify does not
  report (a write through a shared memory map, or through a hard link from outside the
  tree) is still taken within that many ticks. The final checkpoint at a stop uses no
  watch at all.

Any doubt (no inotify, the watch limit reached, an unreadable event) leaves a directory
untrusted: it is checked as before. The library never prints; ``limited`` says when
some directories could not be watched.
"""

from __future__ import annotations

import os
import stat as stat_mod

from . import quiet

#: Every tick checks in full about 1/SWEEP_TICKS of the names, in turn.
SWEEP_TICKS = 16

try:
    from inotify_simple import INotify, flags as _flags

    _MASK = (_flags.MODIFY | _flags.ATTRIB | _flags.CLOSE_WRITE | _flags.CREATE | _flags.DELETE
             | _flags.MOVED_FROM | _flags.MOVED_TO | _flags.DELETE_SELF | _flags.MOVE_SELF | _flags.ONLYDIR)
    _GONE = _flags.IGNORED | _flags.DELETE_SELF | _flags.MOVE_SELF | _flags.UNMOUNT
    _OVERFLOW = int(_flags.Q_OVERFLOW)
except ImportError:  # not Linux, or the package is missing: every directory is checked
    INotify = None


class _Dir:
    __slots__ = ("wd", "ident", "verified", "checked")

    def __init__(self, wd: int, ident: tuple[int, int], armed: int):
        self.wd, self.ident, self.verified = wd, ident, False
        self.checked = armed        # the last tick whose check of the row was a full one


class Watch:
    """The inotify watches of one process's trees. Not thread-safe: one tick at a time."""

    def __init__(self, sweep_ticks: int = SWEEP_TICKS):
        self.sweep_ticks = max(1, sweep_ticks)
        self.limited = False        # some directory could not be watched (limit, error)
        self.overflowed = 0         # times the kernel's queue overflowed
        self._dirs: dict[str, _Dir] = {}
        self._paths: dict[int, str] = {}
        self._tick = 0              # ticks begun; a watch armed at tick N is trusted from N + 2
        self._stamp = None          # the quiet snapshot this watch settled on
        self._fd = None
        if INotify is not None:
            try:
                self._fd = INotify(nonblocking=True)
            except OSError:
                self.limited = True

    @property
    def active(self) -> bool:
        return self._fd is not None

    def trusted(self, state_dir: str) -> frozenset[str]:
        """Begin a tick: the directories of ``state_dir``'s quiet snapshot that need no
        check this tick. Reads every pending event first."""
        self._tick += 1
        if self._fd is None:
            return frozenset()
        self._drain()
        stamp, snapshot = quiet.stamped(state_dir)
        if snapshot is None or stamp != self._stamp:
            return frozenset()
        rows = snapshot.dirs
        candidates = []
        for row in rows:
            d = self._dirs.get(row[0])
            if d is not None and d.verified:
                try:
                    st = os.lstat(row[0])
                except OSError:
                    continue
                if stat_mod.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == d.ident:
                    candidates.append((d.checked, row[0], len(row[1])))
        out = self._unswept(candidates, sum(len(row[1]) for row in rows))
        for row in rows:
            d = self._dirs.get(row[0])
            if d is not None and row[0] not in out:
                d.checked = self._tick
        return out

    def settle(self, state_dir: str | None) -> None:
        """End a tick that checked ``state_dir``'s quiet snapshot, or saved a new one, under
        the state lock (None: a tick that failed, which lets every watch go). The
        snapshot's directories watched since before this tick's check are verified (a
        watch armed at a tick's end is so from the next one's); new ones are watched,
        vanished ones let go."""
        if self._fd is None:
            return
        stamp, snapshot = quiet.stamped(state_dir) if state_dir is not None else (None, None)
        self._stamp = stamp if snapshot is not None else None
        wanted = {row.abs_dir for row in snapshot.dirs} if snapshot is not None else set()
        for path in [p for p in self._dirs if p not in wanted]:
            self._drop(path, remove=True)
        for path in wanted:
            d = self._dirs.get(path)
            if d is None:
                self._arm(path)
            else:
                d.verified = True

    def _arm(self, path: str) -> None:
        """Watch the directory ``path`` names now, through a descriptor, so that the
        inode watched is the one whose identity is recorded."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            wd = self._fd.add_watch(f"/proc/self/fd/{fd}", _MASK)
        except OSError:
            self.limited = True   # ENOSPC: fs.inotify.max_user_watches reached; or no /proc
            return
        finally:
            os.close(fd)
        other = self._paths.get(wd)
        if other is not None and other != path:   # one directory under two paths: trust neither
            self._drop(other, remove=False)
            return
        self._paths[wd] = path
        self._dirs[path] = _Dir(wd, (st.st_dev, st.st_ino), self._tick)

    def _drop(self, path: str, remove: bool) -> None:
        d = self._dirs.pop(path, None)
        if d is None:
            return
        self._paths.pop(d.wd, None)
        if remove:
            try:
                self._fd.rm_watch(d.wd)
            except OSError:
                pass

    def _drain(self) -> None:
        try:
            events = self._fd.read(timeout=0)
        except OSError:
            events = None
        if events is None:
            self._reset()
            return
        for ev in events:
            if ev.mask & _OVERFLOW:
                self.overflowed += 1
                self._reset()
                continue
            path = self._paths.get(ev.wd)
            if path is None:
                continue
            if ev.mask & _GONE:
                self._drop(path, remove=not ev.mask & _flags.IGNORED)
            else:
                self._dirs[path].verified = False

    def _reset(self) -> None:
        for d in self._dirs.values():
            d.verified = False

    def _unswept(self, candidates: list, names: int) -> frozenset[str]:
        """The candidates left once this tick's sweep took, oldest full check first,
        about 1/``sweep_ticks`` of all ``names``: every row is checked in full at least
        about every ``sweep_ticks`` ticks."""
        candidates.sort()
        budget, taken, i = -(-names // self.sweep_ticks), 0, 0
        while i < len(candidates) and taken < budget:
            taken += max(candidates[i][2], 1)
            i += 1
        return frozenset(path for _, path, _ in candidates[i:])
