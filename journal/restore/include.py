"""``restore --include PATTERN``: which entries of a tree a partial restore takes.

A pattern is matched against each entry's ``TREE/PATH``, as ``journal ls`` names it,
by ``journal find``'s glob (``browse.find.glob_regex``): ``*`` and ``?`` stop at
``/``, ``**`` crosses it (``codex/**/*.jsonl``, ``**/*.db``), ``[...]`` is a class.
A pattern that matches a directory, or a tree's name, takes everything under it.
The directories (and any other entry) above a taken path are taken too, so they get
their checkpointed modes; they are not listed as included.

A pattern is relative and names no empty, ``.`` or ``..`` part (``BadInclude``); a
trailing ``/`` is dropped. Every pattern must match something (``IncludeMatchesNothing``).
"""

from __future__ import annotations

import msgspec

from ..browse.find import glob_regex
from ..format.model import Entry
from ..local.files import FileState
from ..local.state import TreeCache
from ..local.treepath import path_problem
from ..paths import shown
from .errors import BadInclude


class Include:
    """The patterns of one partial restore, and which of them matched so far."""

    def __init__(self, patterns: list[str]):
        self.patterns = [_checked(p) for p in patterns]
        self.regexes = [glob_regex(p) for p in self.patterns]
        self.matched: set[int] = set()
        self._memo: dict[str, bool] = {}   # TREE/PATH (a path or a directory above one) -> taken

    def unmatched(self) -> list[str]:
        """The patterns that matched nothing, as given."""
        return [p for i, p in enumerate(self.patterns) if i not in self.matched]

    def may_name(self, tree: str) -> bool:
        """Whether some pattern could match a path of tree ``tree`` (its first part does)."""
        return any("**" in p.partition("/")[0] or glob_regex(p.partition("/")[0]).match(tree) for p in self.patterns)

    def select(self, tree: str, entries: list[Entry]) -> tuple[list[Entry], list[str]]:
        """The entries of ``tree`` a restore takes, in their order, and the paths the
        patterns select (matched, or under a match): those without the parents above."""
        taken = [e.path for e in entries if self._under_match(tree, e.path)]
        keep = set(taken)
        for path in taken:
            while "/" in path:
                path = path.rpartition("/")[0]
                keep.add(path)
        return [e for e in entries if e.path in keep], taken

    def _under_match(self, tree: str, path: str) -> bool:
        """Whether ``TREE/PATH``, the tree or a directory above the path matches a
        pattern. Each is tried (once: memoized), so every pattern that matches is seen."""
        hit = self._hit(tree)
        end = path.find("/")
        while end != -1:
            hit = self._hit(f"{tree}/{path[:end]}") or hit
            end = path.find("/", end + 1)
        return self._hit(f"{tree}/{path}") or hit

    def _hit(self, text: str) -> bool:
        hit = self._memo.get(text)
        if hit is None:
            ids = [i for i, rx in enumerate(self.regexes) if rx.match(text)]
            self.matched.update(ids)
            hit = self._memo[text] = bool(ids)
        return hit


def merge_restored(held: TreeCache, restored: TreeCache) -> TreeCache:
    """A hot disk's tree after a partial restore: ``held``, the local state's view of
    it, with the signatures ``restored`` has of the paths restore wrote or found in
    place. Only a path ``held`` has with the same entry takes its signature: ``held``'s
    entries stay those of its index (another is re-read, a new one is found as new by
    the next checkpoint). When a file came from an older checkpoint than the newest,
    or one was lost, the tree is as a whole restore leaves it then
    (``TreeRun.tree_cache``): the next checkpoint re-reads and re-uploads it."""
    changed = {}
    for path, now in restored.files.items():
        was = held.files.get(path)
        if was is not None and was != now:
            changed[path] = now if now.entry == was.entry else FileState(None, was.entry)
    files = held.files.changed(changed)
    if restored.reupload:
        return TreeCache(root=None, pages={}, files=files, dirty=True, reupload=True, keep_local=held.keep_local,
                         restored=restored.restored, restored_seq=restored.restored_seq)
    return msgspec.structs.replace(held, files=files)


def _checked(pattern: str) -> str:
    """``pattern`` without a trailing ``/``; ``BadInclude`` for one no path can match."""
    if pattern.startswith("/"):
        raise BadInclude(shown(pattern), "an absolute path")
    stripped = pattern.rstrip("/")
    problem = "it is empty" if not stripped else path_problem(stripped)
    if problem:
        raise BadInclude(shown(pattern), problem)
    return stripped
