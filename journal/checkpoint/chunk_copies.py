"""What the local chunk copies keep (``<state_dir>/chunks``, design §6 and §10).

A copy is the whole chunk of a rewritten file, kept as the base of that file's next
delta (``checkpoint/file_delta.py``). It is a cache: a missing copy costs the next
rewrite a whole chunk, never correctness. It may also hold a secret (a token file
rewritten by the agent), so it must not outlive the entry that needs it.

* After every checkpoint that commits, the copies follow the local state: when one
  may have become unused, every copy no entry names (as a ref or as a delta's base)
  is removed. One may have become unused when a copy made now is named by no entry
  read now (its capture was given up), when an entry this checkpoint replaced or
  dropped (a path read now, or a path gone) named a chunk that has a copy
  and no entry read now names it. Otherwise no copy lost its last user, and the pass
  over every entry (which decodes every directory's group) is spared.
* A checkpoint that made copies keeps their total within the configured limit
  (``chunk_copies_limit``, default 64 MiB): over it, copies no entry names go first,
  then the least recently used (a copy used as a base is touched).
"""

from __future__ import annotations

from ..format.model import KIND_FILE
from ..local.files import FileState
from ..local.state import TreeCache
from ..repository.blob_cache import BlobCache


def keep_copies(chunks: BlobCache, old_trees: dict[str, TreeCache], new_trees: dict[str, TreeCache],
                captured: list[FileState], made: list[str], limit: int) -> None:
    """Prune and bound the copies once the checkpoint that went from ``old_trees`` to
    ``new_trees`` committed; ``captured``: the paths it read, ``made``: the copies it made."""
    if _maybe_unused(chunks, old_trees, new_trees, captured, made):
        chunks.prune(chunk_ids(new_trees))
    if made:  # only a new copy makes the directory grow
        chunks.bound(limit, lambda: chunk_ids(new_trees))


def chunk_ids(trees: dict[str, TreeCache]) -> set[str]:
    """Every whole chunk a file entry names (as a ref or as a delta's base): the local
    base copies a later rewrite may use."""
    return {r.id for c in trees.values() for f in c.files.values() if f.entry.kind == KIND_FILE
            for r in (*f.entry.refs, *f.entry.bases) if r is not None}


def _maybe_unused(chunks: BlobCache, old_trees: dict[str, TreeCache], new_trees: dict[str, TreeCache],
                  captured: list[FileState], made: list[str]) -> bool:
    """Whether a copy may have lost its last user in this checkpoint (module docstring)."""
    held = chunks.names()
    if not made and not held:
        return False  # no copy to lose: the ids the paths read name are not gathered (200,000 paths: 16 MB)
    named = {r.id for fs in captured for r in (*fs.entry.refs, *fs.entry.bases) if r is not None}
    if any(rid not in named for rid in made):
        return True
    if not held:
        return False
    replaced = [was for fs in captured for cache in old_trees.values()
                if (was := cache.files.get(fs.entry.path)) is not None]
    gone = [old.files[path] for name, old in old_trees.items() if name in new_trees
            for path in new_trees[name].files.gone_from(old.files)]
    return any(r is not None and r.id in held and r.id not in named
               for was in (*replaced, *gone) if was.entry.kind == KIND_FILE
               for r in (*was.entry.refs, *was.entry.bases))
