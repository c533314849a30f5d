"""Walking a live tree on local disk: os.scandir only, never the store."""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterator
from fnmatch import fnmatchcase
from typing import NamedTuple

from .presets import SQLITE_COMPANIONS

#: Restore's temp directory inside a tree; never part of the tree.
RESTORE_TMP = ".journal-tmp"


class Item(NamedTuple):
    path: str               # relative, "/"-separated
    kind: str               # "file" | "symlink" | "dir" | "sqlite"
    stat: os.stat_result


class Matcher:
    """Decides which paths a tree includes, and which are JSONL transcripts or SQLite.

    A pattern ending in ``/`` matches directories only. A pattern with a ``/`` is
    matched against the relative path, any other against the name alone.
    """

    def __init__(self, exclude: tuple[str, ...] = (), jsonl: tuple[str, ...] = (), sqlite: tuple[str, ...] = ()):
        self.dir_patterns = [p.rstrip("/") for p in exclude if p.endswith("/")]
        self.file_patterns = [p for p in exclude if not p.endswith("/")]
        self.jsonl = jsonl
        self.sqlite = sqlite

    @staticmethod
    def _match(patterns, path: str, name: str) -> bool:
        return any(fnmatchcase(path if "/" in p else name, p) for p in patterns)

    def excluded(self, path: str, name: str, is_dir: bool) -> bool:
        if is_dir and (name == RESTORE_TMP or self._match(self.dir_patterns, path, name)):
            return True
        if self._match(self.file_patterns, path, name):
            return True
        return not is_dir and self.sqlite_companion(path, name)

    def is_jsonl(self, path: str) -> bool:
        return self._match(self.jsonl, path, path.rsplit("/", 1)[-1])

    def is_sqlite(self, path: str, name: str) -> bool:
        return self._match(self.sqlite, path, name)

    def sqlite_companion(self, path: str, name: str) -> bool:
        """A ``-wal``/``-shm``/``-journal`` file of a database the sqlite patterns match."""
        if not self.sqlite:
            return False
        for suffix in SQLITE_COMPANIONS:
            if name.endswith(suffix):
                base = name[: -len(suffix)]
                if self.is_sqlite(path[: -len(suffix)], base):
                    return True
        return False


def walk_tree(root: str, matcher: Matcher, skipped: list[str] | None = None) -> Iterator[Item]:
    """Yield the tree's directories, files and symlinks (each directory in name order).

    Symlinks are never followed. Sockets, FIFOs and devices are skipped. A path that
    vanishes during the walk is skipped silently. Names that are not valid UTF-8 are
    skipped and appended to ``skipped``.
    """
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                dirents = sorted(it, key=lambda d: d.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        subdirs = []
        for d in dirents:
            rel = f"{rel_dir}/{d.name}" if rel_dir else d.name
            try:
                rel.encode("utf-8")
                st = d.stat(follow_symlinks=False)
            except UnicodeEncodeError:
                if skipped is not None:
                    skipped.append(os.path.join(root, rel))
                continue
            except FileNotFoundError:
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                if not matcher.excluded(rel, d.name, True):
                    yield Item(rel, "dir", st)
                    subdirs.append(rel)
            elif stat_mod.S_ISREG(st.st_mode) or stat_mod.S_ISLNK(st.st_mode):
                if matcher.excluded(rel, d.name, False):
                    continue
                if stat_mod.S_ISLNK(st.st_mode):
                    yield Item(rel, "symlink", st)
                else:
                    yield Item(rel, "sqlite" if matcher.is_sqlite(rel, d.name) else "file", st)
        stack.extend(reversed(subdirs))
