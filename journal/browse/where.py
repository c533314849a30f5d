"""Naming what to browse: ``TREE/PATH``, as ``journal trees`` and ``journal ls`` show it.

The tree's name comes first, then the path inside the tree. A path is held to the
path rule (``local/treepath.py``): relative, no empty, ``.`` or ``..`` component. A
trailing ``/`` is dropped (``codex/sessions/`` is ``codex/sessions``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..config import TREE_NAME
from .errors import BadBrowsePath
from ..local.treepath import path_problem
from ..paths import shown

#: The character after ``/``: the paths under directory ``d`` are exactly those in
#: ``[d + "/", d + AFTER_SLASH)`` (content-defined pages keep paths in this order).
AFTER_SLASH = chr(ord("/") + 1)


class Where(NamedTuple):
    """A tree (None: every tree) and a path inside it ("": the tree's root)."""

    tree: str | None
    path: str

    def __str__(self) -> str:
        return shown_path(self.tree or "", self.path)


def joined(tree: str, path: str) -> str:
    """``tree/path`` as the commands name it (the tree alone for its root)."""
    return f"{tree}/{path}" if path else tree


def shown_path(tree: str, path: str) -> str:
    """``joined`` on one line, as messages print it (``paths.shown``)."""
    return shown(joined(tree, path))


HINT = "name it as `journal ls` shows it: TREE/PATH, relative, without empty, '.' or '..' parts"


def parse_where(text: str | None, op: str) -> Where:
    """``TREE[/PATH]`` as typed; ``BadBrowsePath`` (exit 2) for one no tree can hold."""
    if text is None:
        return Where(None, "")
    if text.startswith("/"):
        raise BadBrowsePath(op, shown(text), f"an absolute path; {HINT}")
    stripped = text.rstrip("/")
    tree, _, path = stripped.partition("/")
    if not TREE_NAME.match(tree):
        raise BadBrowsePath(op, shown(text), f"{shown(tree)!r} is not a tree name (lowercase letters, digits, "
                                             f"'-' and '_'); {HINT}")
    problem = path and path_problem(path)
    if problem:
        raise BadBrowsePath(op, shown(text), f"{problem}; {HINT}")
    return Where(tree, path)


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or lies below it ("" holds everything)."""
    return not prefix or path == prefix or path.startswith(prefix + "/")


def range_prune(lo: str, hi: str | None) -> Callable[[str, str | None], bool]:
    """A walk's ``prune`` for the paths in ``[lo, hi)``: a page spanning ``[first, upper)``
    that cannot hold one is skipped."""
    def prune(first: str, upper: str | None) -> bool:
        return (hi is not None and first >= hi) or (upper is not None and upper <= lo)
    return prune


def subtree_prune(path: str) -> Callable[[str, str | None], bool]:
    """The pages that may hold ``path`` or a path below it (every page for the root)."""
    return range_prune(path, path + AFTER_SLASH) if path else range_prune("", None)
