"""What both the idle fast path (``launch``) and the click app print on their own: the
idle line, the interrupted line and its exit code, and whether ``--json`` was asked.

``launch`` imports this before click, so it imports nothing of journal or click.
"""

from __future__ import annotations

import sys

IDLE_LINE = "idle: nothing changed in {} tree(s); nothing written"
INTERRUPTED = 130  # 128 + SIGINT, as the command line exits on Ctrl-C


def wants_json(argv: list[str]) -> bool:
    """Whether the command line asks for ``--json`` (anything after ``--`` is CMD's)."""
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def interrupted(as_json: bool = False) -> None:
    """Say that Ctrl-C stopped the command; with ``--json``, also as the JSON error
    object (as ``app.emit_json`` prints it)."""
    try:
        if as_json:
            sys.stdout.write('{\n  "error": "interrupted",\n  "kind": "Interrupted",\n  "exit": %d\n}\n' % INTERRUPTED)
            sys.stdout.flush()
        sys.stderr.write("journal: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
