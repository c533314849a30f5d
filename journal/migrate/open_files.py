"""Transcripts another process holds open, found through ``/proc``, and the complete
lines of one: a migration captures an open transcript's complete lines only, and
says which process holds it."""

from __future__ import annotations

import os

import msgspec

from ..config import TreeConfig
from ..local.walk import Matcher


class OpenTranscript(msgspec.Struct, frozen=True, kw_only=True):
    """A transcript some process holds open."""

    path: str               # as the kernel names it (symlinks resolved)
    tree: str
    rel: str                # its path in the tree
    pids: tuple[int, ...]
    writing: bool           # some holder has it open for writing
    legacy: bool = False    # it lies in a legacy source, not in the live tree



def open_files() -> dict[str, tuple[set[int], bool]]:
    """Every file another process holds open: path -> (pids, open for writing by one)."""
    found: dict[str, tuple[set[int], bool]] = {}
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # exited, or not ours to read
        for fd in fds:
            try:
                path = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if not path.startswith("/") or path.endswith(" (deleted)"):
                continue
            pids, writing = found.get(path, (set(), False))
            pids.add(int(pid))
            found[path] = (pids, writing or _fd_writes(pid, fd))
    return found


def _fd_writes(pid: str, fd: str) -> bool:
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
            for line in fh:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
    except (OSError, ValueError, IndexError):
        pass
    return False


def find_open_transcripts(trees: dict[str, TreeConfig], sources: dict[str, list]) -> list[OpenTranscript]:
    """Transcripts (the tree's JSONL patterns) held open under a live tree or a legacy
    source (``plan.Source``: its ``root``)."""
    roots = [(os.path.realpath(t.path), t, False) for t in trees.values()]
    roots += [(os.path.realpath(s.root), trees[name], True) for name, srcs in sources.items() if name in trees
              for s in srcs]
    out = []
    for path, (pids, writing) in sorted(open_files().items()):
        for root, tree, legacy in roots:
            if path.startswith(root + "/"):
                rel = path[len(root) + 1:]
                if _is_transcript(tree, rel) and os.path.isfile(path):
                    out.append(OpenTranscript(path=path, tree=tree.name, rel=rel, pids=tuple(sorted(pids)),
                                              writing=writing, legacy=legacy))
                break
    return out


def _is_transcript(tree: TreeConfig, rel: str) -> bool:
    matcher = Matcher(tree.exclude, tree.jsonl, tree.sqlite)
    return matcher.is_jsonl(rel) and matcher.reaches(rel)


def complete_length(fd: int, size: int) -> int:
    """The length of the complete lines among the first ``size`` bytes (up to the last ``\\n``)."""
    pos = size
    while pos > 0:
        start = max(0, pos - (1 << 16))
        cut = os.pread(fd, pos - start, start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0
