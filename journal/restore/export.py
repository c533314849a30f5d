"""``restore --to DIR``: an export holds exactly the checkpoint asked for.

Restore writes every stored tree to ``DIR/<tree>`` by the same rules as a live
restore, which keep what is already there when it is newer, extends a transcript or
is a valid database. Into a directory that already holds an export, that would mix
two checkpoints; so:

* an absent or empty ``DIR`` is written;
* a non-empty ``DIR`` is refused (``ExportNotEmpty``), nothing changed, unless
  ``--replace`` is given;
* with ``--replace``, ``DIR`` must hold an export journal wrote and nothing else: its
  marker ``DIR/.journal-export`` names the trees that export wrote, and every other
  name in ``DIR`` is refused, never deleted. Those trees are removed (the walk never
  follows a symlink, so nothing outside ``DIR`` is touched), then the checkpoint is
  written into the emptied directory.

The marker is replaced atomically before the first tree is touched, naming the trees
of the old and the new export, and again when the export ends, naming the new ones:
an interrupted export can still be replaced, and what it left is never taken for a
finished one (``complete`` stays false).
"""

from __future__ import annotations

import os
import stat as stat_mod

import msgspec

from ..config import TREE_NAME
from .errors import ExportNotEmpty
from ..local.tree_tmp import PREFIX as TMP_PREFIX, TreeTmp

MARK = ".journal-export"


class ExportMark(msgspec.Struct, kw_only=True):
    """What ``DIR/.journal-export`` says: the trees an export wrote, from which checkpoint."""

    trees: list[str]
    seq: int | None = None
    complete: bool = False
    include: list[str] = []     # a partial export: the patterns that selected its paths


def read_mark(to: str) -> ExportMark | None:
    """The marker of an export in ``to``; None when absent, unreadable or naming a bad tree."""
    try:
        fd = os.open(os.path.join(to, MARK), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        mark = msgspec.json.decode(os.read(fd, 1 << 20), type=ExportMark)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    finally:
        os.close(fd)
    return mark if all(TREE_NAME.match(name) for name in mark.trees) else None


def check_export_dir(to: str, replace: bool) -> list[str]:
    """The trees of an earlier export that ``--replace`` removes from ``to`` ([] when
    ``to`` is absent or empty). Raises ``ExportNotEmpty`` when ``to`` holds anything
    else, or anything at all without ``replace``; nothing is changed."""
    try:
        names = sorted(os.listdir(to))
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise ExportNotEmpty(to, "not a directory; choose another directory") from None
    if not names:
        return []
    mark = read_mark(to)
    if not replace:
        if mark is not None:
            what = "an interrupted export" if not mark.complete else f"the export of checkpoint {mark.seq}"
            raise ExportNotEmpty(to, f"already holds {what}; replace it (`journal restore --to DIR --replace`), "
                                     "or choose an empty or new directory")
        raise ExportNotEmpty(to, f"not empty ({len(names)} entries, e.g. {names[0]!r}); "
                                 "choose an empty or new directory")
    if mark is None:
        raise ExportNotEmpty(to, f"holds no journal export ({MARK} is missing or unreadable), so replacing it "
                                 "would delete files journal did not write; choose an empty or new directory")
    ours = set(mark.trees) | {MARK}
    # journal's temp directory, as a killed export left it: never removed here (the
    # restore's sweep removes it if it is one journal recorded), never taken as foreign
    foreign = [name for name in names if name not in ours and not name.startswith(TMP_PREFIX)]
    if foreign:
        raise ExportNotEmpty(to, f"{os.path.join(to, foreign[0])} was not written by the export there; "
                                 "a replace deletes only an export's own trees: move it away or choose another "
                                 "directory")
    return [name for name in mark.trees if name in names]


def begin_export(to: str, old: list[str], new: list[str], state_dir: str) -> None:
    """Mark ``to`` as an export in progress (naming ``old`` and ``new`` trees), then
    remove the ``old`` trees an earlier export wrote there."""
    os.makedirs(to, exist_ok=True)
    write_mark(to, ExportMark(trees=sorted(set(old) | set(new))), state_dir)
    for name in old:
        remove_tree(os.path.join(to, name))


def write_mark(to: str, mark: ExportMark, state_dir: str) -> None:
    """Replace ``to``'s marker atomically, through a temp directory of journal's own
    there (``local/tree_tmp.py``)."""
    tmp = TreeTmp.make(to, state_dir)
    try:
        tmp.publish(os.path.join(to, MARK), msgspec.json.encode(mark), clobber=True)
    finally:
        tmp.close()


def remove_tree(path: str) -> None:
    """Remove ``path`` and what is under it, never following a symlink (a link is
    removed, not what it points at). Directories are made writable first, so a tree
    restored with read-only directories can be removed."""
    import shutil

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat_mod.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    _writable(path)
    for parent, dirs, _ in os.walk(path):  # never descends into a symlink
        for name in dirs:
            _writable(os.path.join(parent, name))
    shutil.rmtree(path)  # fd-based: a directory swapped for a symlink meanwhile is refused


def _writable(path: str) -> None:
    try:
        st = os.lstat(path)
        if stat_mod.S_ISDIR(st.st_mode) and stat_mod.S_IMODE(st.st_mode) & 0o700 != 0o700:
            os.chmod(path, stat_mod.S_IMODE(st.st_mode) | 0o700, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass  # rmtree then names what it cannot remove
