"""A tree's cached paths (``TreeCache.files``), grouped by their parent directory.

A busy tick of a large tree changes a few directories; the rest of the tree's cache
is carried from the last state as it is. So the cache is a mapping of path to
``FileState`` held as one ``Group`` per parent directory (design §10): a group read
from a state base stays the bytes it was stored as until something asks for one of
its paths, and a group a tick did not touch is carried to the next state, and saved
into the next base, by identity, without an object per path. Each group knows its
totals (paths, files that are no directory, their bytes, whether it holds a
database), so a tree's counts need no pass over its paths.

A ``Files`` is never changed once made; a scan builds the next one (``Files.build``)
from the groups it takes as they were and the paths it read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import msgspec

from ..format.model import KIND_DIR, KIND_SQLITE, Entry


class FileState(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A path as the last scan left it: its signature when last read, and its entry.

    * ``sig``: a ``Signature``, ``DbSignature`` or ``DirSignature`` by the entry's kind
      (``signatures.py``), stored as a plain 4-tuple; None: read the path again.
    * ``roll``: for a transcript, where the next growing capture's rolling re-check
      starts (``capture.check_prefix``, design §6).
    * ``dev``: the device a regular file was read on (``st_dev``); 0 when unknown (a
      state written before this field, a path restore wrote, a database). With the
      inode, it tells a renamed transcript (``scan._not_renamed``).

    The trailing fields are ones an older reader ignores; a state without them reads
    as 0. Frozen: a save finds the paths that differ from the base by identity first
    (``state._changes``), so a new value must be a new object. Not tracked by the
    garbage collector (one per path; its fields form no cycle: ``format/model.py``)."""

    sig: tuple[int, int, int, int] | None
    entry: Entry
    roll: int = 0
    dev: int = 0


#: ``Group.flags``: the group holds a database snapshot entry.
HAS_DB = 1

_ABSENT = object()
_NONE: dict = {}
_decode = msgspec.msgpack.Decoder(dict[str, FileState]).decode
_encode = msgspec.msgpack.Encoder().encode


def parent(path: str) -> str:
    """The directory a path is in ("" for the tree's top)."""
    return path.rpartition("/")[0]


class GroupRecord(msgspec.Struct, array_like=True, gc=False):
    """A group as a version 4 base stores it: its totals, then its paths' map as it was
    encoded (``msgspec.Raw``: decoded only when a path of the group is asked for)."""

    n: int
    nfiles: int
    nbytes: int
    flags: int
    paths: msgspec.Raw


class Group:
    """The cached paths of one directory (full paths, as the tree's keys), with their
    totals; ``raw`` the stored bytes of ``paths`` until they are first asked for."""

    __slots__ = ("raw", "_paths", "n", "nfiles", "nbytes", "flags")

    def __init__(self, paths: dict[str, FileState] | None, n: int, nfiles: int, nbytes: int, flags: int,
                 raw: bytes | msgspec.Raw | None = None):
        self._paths, self.raw = paths, raw
        self.n, self.nfiles, self.nbytes, self.flags = n, nfiles, nbytes, flags

    @classmethod
    def of(cls, paths: dict[str, FileState]) -> "Group":
        nfiles = nbytes = flags = 0
        for fs in paths.values():
            kind = fs.entry.kind
            if kind != KIND_DIR:
                nfiles += 1
                nbytes += fs.entry.size
                if kind == KIND_SQLITE:
                    flags |= HAS_DB
        return cls(paths, len(paths), nfiles, nbytes, flags)

    @classmethod
    def stored(cls, record: GroupRecord) -> "Group":
        return cls(None, record.n, record.nfiles, record.nbytes, record.flags, raw=record.paths)

    @property
    def paths(self) -> dict[str, FileState]:
        """The group's paths, decoded on first use (never to be changed). A stored map
        that does not hold the number of paths its record says is refused (``ValueError``;
        the base's digest makes that a writer's bug, never a torn file)."""
        if self._paths is None:
            paths = _decode(self.raw)
            if len(paths) != self.n:
                raise ValueError(f"a state base's group holds {len(paths)} paths, its record says {self.n}")
            self._paths, self.raw = paths, None
        return self._paths

    def record(self) -> GroupRecord:
        """The group as a base stores it: the bytes it was read as, or its map encoded now."""
        raw = (self.raw if isinstance(self.raw, msgspec.Raw) else msgspec.Raw(self.raw)) if self._paths is None \
            else msgspec.Raw(_encode(self._paths))
        return GroupRecord(self.n, self.nfiles, self.nbytes, self.flags, raw)


def _same(now: dict[str, FileState], was: dict[str, FileState]) -> bool:
    get = was.get
    return all(get(k) is v for k, v in now.items())


def _regroup(groups: dict[str, Group], set_: Mapping[str, FileState], gone=()) -> dict[str, Group]:
    """``groups`` (changed in place, and returned) with the paths ``set_`` set and those
    ``gone`` taken out: each directory they fall in gets a new group (an emptied one
    none), the others stay the very objects they were."""
    fresh: dict[str, dict[str, FileState]] = {}

    def of(d: str) -> dict[str, FileState]:
        paths = fresh.get(d)
        if paths is None:
            was = groups.get(d)
            paths = fresh[d] = dict(was.paths) if was is not None else {}
        return paths

    for path in gone:
        of(parent(path)).pop(path, None)
    for path, fs in set_.items():
        of(parent(path))[path] = fs
    for d, paths in fresh.items():
        if paths:
            groups[d] = Group.of(paths)
        else:
            groups.pop(d, None)
    return groups


class Files(Mapping):
    """A tree's cached paths: ``path -> FileState``, by group (see the module docstring)."""

    __slots__ = ("groups", "_len")

    def __init__(self, groups: dict[str, Group] | None = None):
        self.groups: dict[str, Group] = groups if groups is not None else {}
        self._len = sum(g.n for g in self.groups.values())

    @classmethod
    def of(cls, paths: Mapping[str, FileState]) -> "Files":
        """The paths of a plain mapping, grouped."""
        return paths if isinstance(paths, Files) else cls(_regroup({}, paths))

    @classmethod
    def build(cls, taken: dict[str, Group], read: dict[str, FileState], old: "Files | None" = None) -> "Files":
        """The groups ``taken`` as they are, with the paths ``read`` (grouped; a path in
        a taken group's directory makes that group a new one, the taken one unchanged).
        A directory whose paths read are exactly ``old``'s group, value for value (the
        same objects), keeps that group: a walk that found nothing new in a directory
        leaves it as the last state held it."""
        groups = _regroup(dict(taken), read)
        if old is not None:
            held = old.groups
            for d, group in groups.items():
                was = held.get(d)
                if was is not None and was is not group and was.n == group.n and _same(group.paths, was.paths):
                    groups[d] = was
        return cls(groups)

    def changed(self, set_: Mapping[str, FileState], gone=()) -> "Files":
        """These paths with ``set_`` set and ``gone`` taken out (a state file's changes)."""
        return Files(_regroup(dict(self.groups), set_, gone))

    def diff(self, old: "Files") -> tuple[dict[str, FileState], list[str], list[str]]:
        """``(set, gone, dirs)``: the paths whose value is not ``old``'s (the same object
        first, an equal one then), the paths of ``old`` these lack, and the directories
        they fall in (whose groups merging the changes back onto ``old`` makes anew).
        Groups that are the very objects ``old`` holds are not looked into."""
        set_: dict[str, FileState] = {}
        gone: list[str] = []
        dirs: list[str] = []
        held = old.groups
        for d, group in self.groups.items():
            was = held.get(d)
            if was is group:
                continue
            if was is None:
                set_.update(group.paths)
                dirs.append(d)
                continue
            now, get = group.paths, was.paths.get
            changed = {k: v for k, v in now.items() if (w := get(k, _ABSENT)) is not v and w != v}
            lost = [k for k in was.paths if k not in now] if len(now) - len(changed) < was.n else []
            if changed or lost:
                set_.update(changed)
                gone += lost
                dirs.append(d)
        for d, was in held.items():
            if d not in self.groups:
                gone += was.paths
                dirs.append(d)
        return set_, gone, dirs

    def gone_from(self, old: "Files") -> list[str]:
        """The paths of ``old`` these lack (only directories whose group changed are looked into)."""
        return self.diff(old)[1]

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, path: str) -> FileState:
        group = self.groups.get(parent(path))
        if group is None:
            raise KeyError(path)
        return group.paths[path]

    def in_dir(self, d: str) -> dict[str, FileState]:
        """The paths held in directory ``d`` (``parent`` of each), by full path: the
        one lookup a pass over a directory's names makes (never to be changed)."""
        group = self.groups.get(d)
        return group.paths if group is not None else _NONE

    def get(self, path: str, default=None):
        group = self.groups.get(parent(path))
        return default if group is None else group.paths.get(path, default)

    def __contains__(self, path) -> bool:
        group = self.groups.get(parent(path)) if isinstance(path, str) else None
        return group is not None and path in group.paths

    def __iter__(self) -> Iterator[str]:
        for group in self.groups.values():
            yield from group.paths

    def values(self):
        return [fs for group in self.groups.values() for fs in group.paths.values()]

    def items(self):
        return [item for group in self.groups.values() for item in group.paths.items()]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return len(self) == len(other) and dict(self.items()) == dict(other.items())

    __hash__ = None

    def __repr__(self) -> str:
        return f"Files({len(self)} paths in {len(self.groups)} directories)"

    @property
    def nfiles(self) -> int:
        """The paths that are no directory."""
        return sum(g.nfiles for g in self.groups.values())

    @property
    def nbytes(self) -> int:
        """Their bytes."""
        return sum(g.nbytes for g in self.groups.values())
