"""The full command line: the click group of ``app`` with every command registered.

Each command module puts its commands on ``app.main``; importing it registers them,
and this is the one place that imports them. ``commands`` (checkpoint, restore and the
rest run every tick or at start) is imported here; the others are imported only when
one of their commands runs or ``journal --help`` lists them (``OneLineGroup.lazy``):
a new command module is one more line in ``LAZY``, one per command it registers.
"""

from __future__ import annotations

from . import commands  # noqa: F401  (registers its commands on ``main``)
from .app import main

#: Command name -> the module of ``journal.cli`` that registers it.
LAZY = {
    "ls": "browse", "cat": "browse", "diff": "browse", "find": "browse",
    "copy": "copying",
    "forget": "retention", "gc": "retention",
    "input": "inputs",
    "key": "keys",
    "migrate": "migrate",
    "mount": "mount",
    "stats": "stats",
    "sessions": "sessions", "show": "sessions",
}
main.lazy = LAZY

__all__ = ["main"]
