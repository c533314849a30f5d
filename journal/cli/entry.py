"""The full command line: the click group of ``app`` with every command registered.

Each command module puts its commands on ``app.main``; importing it registers them,
and this is the one place that imports them. A new command module is one more name
on the import line below.
"""

from __future__ import annotations

from . import browse, commands, inputs, keys, migrate  # noqa: F401  (each registers its commands on ``main``)
from .app import main

__all__ = ["main"]
