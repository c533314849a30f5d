"""The one rule for the paths of a tree's entries, used by checkpoint and restore alike.

A path is relative and ``/``-separated. Each component is a name the Linux kernel
allows that is not a traversal: not empty, not ``.`` or ``..``, no NUL, at most
``NAME_MAX`` bytes. Everything else is an ordinary name and round-trips byte for
byte: backslashes (zips made on Windows), newlines and other control characters,
leading or trailing spaces, a leading ``-``, names that start with ``.journal``.

Two limits come from how paths are stored and used, not from the kernel's names:

* paths are stored as JSON text, so a name (or a symlink target) that is not valid
  UTF-8 cannot be stored: checkpoint refuses it with a warning naming it, on every
  checkpoint, and never drops it silently;
* a live path (the tree's root, ``/``, the path) must be shorter than ``PATH_MAX``,
  since every call names it in full. Checkpoint cannot read a longer one: it says so,
  naming it, and keeps its last checkpoint (``local/walk.py``'s unreadable paths). Restore,
  whose destination may be deeper, finds such a path when it looks at it
  (``restore/entry.py``'s ``decide``): lost when nothing is there (``cannot-create``), else kept.

Restore refuses one entry at a time: an entry the rule refuses is reported lost, and
the rest of its tree is restored (``restore/trees.py``).
"""

from __future__ import annotations

import re

#: Longest name of one path component, in bytes (Linux ``NAME_MAX``).
NAME_MAX = 255
#: Longest path the kernel takes, in bytes, with its terminating NUL (Linux ``PATH_MAX``).
PATH_MAX = 4096


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one component of an entry's path; None when it can."""
    if name in ("", ".", ".."):
        return "it has an empty, '.' or '..' component"
    if "/" in name or "\0" in name:
        return "it has a NUL or '/' inside a name"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "its name is not valid UTF-8"
    if size > NAME_MAX:
        return f"a name is longer than {NAME_MAX} bytes"
    return None


_LONG_NAME = re.compile(r"[^/]{%d}" % (NAME_MAX + 1))


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot be an entry's path; None when it can (see the module docstring)."""
    if path.isascii() and "\0" not in path:  # the common case, checked fast (restore checks every entry)
        padded = f"/{path}/"
        if "//" not in padded and "/./" not in padded and "/../" not in padded and not _LONG_NAME.search(path):
            return None
    if path.startswith("/"):
        return "it is absolute"
    for name in path.split("/"):
        problem = name_problem(name)
        if problem is not None:
            return problem
    return None


def target_problem(target: str) -> str | None:
    """Why ``target`` cannot be stored as a symlink's target; None when it can. A target
    may point anywhere (symlinks are stored, never followed)."""
    if not target or "\0" in target:
        return "its symlink target is empty or holds a NUL"
    try:
        size = len(target.encode("utf-8"))
    except UnicodeEncodeError:
        return "its symlink target is not valid UTF-8"
    if size >= PATH_MAX:
        return f"its symlink target is longer than {PATH_MAX - 1} bytes"
    return None


