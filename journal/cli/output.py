"""What both the idle fast path (``launch``) and the click app print on their own: the
idle line, how every command says a count (``count``, ``number``: ``render`` uses them
too), the interrupted line and its exit code, whether ``--json`` was asked, and
how a command ends when the reader of its output went away (``journal log | head -1``).

``launch`` imports this before click, so it imports nothing of journal or click.
"""

from __future__ import annotations

import os
import sys

IDLE_LINE = "idle: nothing changed in {}; nothing written"
INTERRUPTED = 130  # 128 + SIGINT, as the command line exits on Ctrl-C
READER_GONE = 141  # 128 + SIGPIPE, as a shell reports a tool that SIGPIPE ended (`| head`)


class OutputClosed(Exception):
    """stdout's (or stderr's) reader went away. Not an ``OSError``: click turns an
    ``EPIPE`` into exit 1, so the app raises this past click to the launcher, which
    ends the command with ``READER_GONE`` (``reader_gone``)."""


def number(n: int) -> str:
    """Every count and size a command prints, one way: with thousands separators (``12,345``)."""
    return f"{n:,}"


def plural(noun: str) -> str:
    """``file`` -> ``files``, ``directory`` -> ``directories``, ``match`` -> ``matches``
    (the last word of ``orphan pack`` -> ``orphan packs``)."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u", ""):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def count(n: int, noun: str) -> str:
    """A number and its noun, as every command says it: ``1 file``, ``3 files``,
    ``12,345 bytes`` (never ``file(s)``, never ``1 files``)."""
    return f"{number(n)} {noun if n == 1 else plural(noun)}"


def idle_line(trees: int) -> str:
    """The line of an idle checkpoint."""
    return IDLE_LINE.format(count(trees, "tree"))


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


def _closed(fd: int) -> bool:
    """Whether ``fd`` is a pipe (or socket) whose reader went away."""
    import select   # only when a write failed: not on the idle fast path

    poll = select.poll()
    try:
        poll.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except (OSError, ValueError):
        return False


def output_closed() -> bool:
    """Whether stdout or stderr lost its reader: the one ``BrokenPipeError`` that ends a
    command quietly. Any other (a socket the library writes) is an error like any other."""
    return _closed(1) or _closed(2)


def reader_gone() -> int:
    """End a command whose reader went away as a Unix tool does, quietly: point a
    closed stdout or stderr at /dev/null (so nothing, not even the interpreter's final
    flush, writes to it again) and give the exit status ``READER_GONE``."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        if _closed(fd):
            os.dup2(devnull, fd)
    os.close(devnull)
    return READER_GONE
