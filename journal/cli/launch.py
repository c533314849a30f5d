"""The ``journal`` console command.

``journal checkpoint`` runs every few seconds from cron or a timer, and most runs find
nothing to do. Such a run is answered here, from the quiet snapshot (``local/quiet.py``),
before the command line and the library are imported (click and msgspec alone take
longer to import than the check takes to run). A plain ``journal checkpoint`` that
finds work (a change, a configuration file that may move the state directory, a busy
lock) runs here too, without importing click: the checkpoint command's own body
(``tick``) under its error renderer (``base``). Anything else (another command,
``--wait``, an option this parser does not know, a ``--config`` click would refuse,
a ``$JOURNAL_DEBUG`` that is no yes or no) goes to the full command line
(``journal.cli.entry``) unchanged.
"""

from __future__ import annotations

import gc
import os
import sys
import time

from .output import INTERRUPTED, OutputClosed, idle_line, interrupted, output_closed, reader_gone, wants_json


def main(fast_exit: bool = False) -> int | None:
    """Answer an idle ``journal checkpoint`` here, else run the full command line; the
    exit status. ``fast_exit`` (the console script): once the command is over, leave
    with ``os._exit`` (``_leave``); after an idle answer there is nothing to tear down,
    and freeing the decoded snapshot takes longer than the rest of the exit. A Ctrl-C
    before the command line handles it (while click and the library are imported) is
    one line and exit 130, as it is later. When the reader of stdout goes away
    (``journal log | head -1``), at any write or at the final flush, the command ends
    here, quietly, with exit 141 (``output.reader_gone``)."""
    try:
        try:
            code = _main()
        except SystemExit as done:
            code = done.code
        if sys.stdout is not None:   # None: started with stdout closed
            sys.stdout.flush()   # here, not in the interpreter's exit, so a closed pipe is caught below
    except KeyboardInterrupt:
        interrupted(wants_json(sys.argv[1:]))
        code = INTERRUPTED
    except (BrokenPipeError, OutputClosed):
        if not output_closed():
            raise
        code = reader_gone()
    if fast_exit:
        _leave(code)
    return code


def _main() -> int | None:
    started = time.monotonic()
    opts = _checkpoint_options(sys.argv[1:])
    if opts is not None:
        # No cyclic garbage collection for a plain ``journal checkpoint``: the quiet
        # check's decoded snapshot, then the imports (objects, classes and functions that
        # live as long as the process) made it run ~30 times with nothing to collect,
        # 1-3 ms of a busy tick; the tick pauses it too (``heap.cycles_paused``, not used
        # here: it imports contextlib, ~4 ms of the idle answer). It is restored for
        # whatever runs next (the full command line, below).
        collecting = gc.isenabled()
        gc.disable()
        try:
            done = _plain_checkpoint(opts, started)
        finally:
            if collecting:
                gc.enable()
        if done is not _FULL:
            return done
    import_msgspec()
    from .entry import main as cli_main

    return cli_main()


_FULL = object()   # ``_plain_checkpoint``: this command needs the full command line


def _plain_checkpoint(opts: dict, started: float):
    """Answer a plain ``journal checkpoint`` here: from the quiet snapshot when it proves
    nothing changed, else by running the checkpoint without click; the exit status,
    or ``_FULL`` when it needs the full command line (an odd ``$JOURNAL_DEBUG``)."""
    proven = _quiet_checkpoint(opts)
    if proven is not None:
        seconds = time.monotonic() - started
        if opts["json"]:  # as app.emit_json prints it, without importing json or msgspec
            print(proven.result_json.replace('"seconds": 0.0', f'"seconds": {seconds!r}', 1))
        else:
            print(idle_line(len(proven.result["trees"])))
        return 0
    debug = _plain_debug(opts)
    if debug is None:
        return _FULL
    import_msgspec()
    return _busy_checkpoint(opts, debug)


def import_msgspec() -> None:
    """Import msgspec as this console process uses it, without ``typing_extensions``.

    msgspec takes ``get_type_hints`` from ``typing_extensions`` when that is installed
    (the cloud extra brings it) and from ``typing`` otherwise; importing it pulls in
    ``inspect``, ``ast`` and ``tokenize``, about 8 ms of every command's start. journal's
    types need nothing ``typing`` lacks on Python 3.11, and this process runs only
    journal, so the library is imported here as on a machine without it. Only the
    import is steered: ``typing_extensions`` stays importable for whoever asks later
    (the cloud stores). A library user's process is never touched (design §10)."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None   # an import of it raises ImportError, which msgspec expects
    try:
        __import__("msgspec")
    finally:
        del sys.modules["typing_extensions"]


def _leave(code) -> None:
    """Exit with ``code`` (as ``sys.exit`` reads it) once the command is over. With no
    other thread alive nothing is left to wait for: every file the command wrote is
    closed (and fsynced where it publishes), so skip the interpreter's teardown (~15 ms
    of freeing a restore's objects), after flushing stderr (``main`` flushed stdout)."""
    threading = sys.modules.get("threading")   # not imported: no other thread (the idle path)
    if threading is not None and threading.active_count() > 1:
        sys.exit(code)
    status = 0 if code is None else code if isinstance(code, int) else 1
    if not isinstance(code, (int, type(None))):
        print(code, file=sys.stderr)   # sys.exit("message") prints the message
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)


def _busy_checkpoint(opts: dict, debug: bool) -> None:
    """Run the checkpoint command as click would: its body (``tick``) under the
    renderer of every command's errors (``base.command_errors``). Ctrl-C ends it in
    ``main`` after the blank line click writes first."""
    from .base import command_errors, echo
    from .tick import checkpoint_command

    try:
        with command_errors(opts["json"], debug):
            checkpoint_command(opts["config"], opts["store"], opts["json"],
                               allow_deletions=opts["allow_deletions"], wait=False)
    except (EOFError, KeyboardInterrupt) as stop:   # click: a newline, then Abort (exit 130)
        echo(err=True)
        raise KeyboardInterrupt from stop


#: How click reads a yes/no environment variable (``$JOURNAL_DEBUG``); anything else is
#: its usage error.
_YES = frozenset({"1", "true", "t", "yes", "y", "on"})
_NO = frozenset({"", "0", "false", "f", "no", "n", "off"})


def _plain_debug(opts: dict) -> bool | None:
    """Whether ``--debug`` (or ``$JOURNAL_DEBUG``) is on, for a command line click would
    take without a usage error; None (the full command line) when it might not: a
    ``$JOURNAL_DEBUG`` click would refuse, a ``--config`` naming a directory or an
    unreadable file (``click.Path(dir_okay=False)``)."""
    config = opts["config"]
    if config is not None:
        import stat

        try:
            st = os.stat(config)
        except OSError:
            pass
        else:
            if stat.S_ISDIR(st.st_mode) or not os.access(config, os.R_OK):
                return None
    if opts["debug"]:
        return True
    value = os.environ.get("JOURNAL_DEBUG")
    if value is None:
        return False
    value = value.strip().lower()
    return True if value in _YES else False if value in _NO else None


#: The options ``journal`` itself takes before the command (``app.shared_options``).
_GLOBAL = ("--json", "--debug", "--store", "--config")


def _checkpoint_options(argv: list[str]) -> dict | None:
    """The options of a plain ``journal checkpoint`` command line (the ones every
    command takes may come before ``checkpoint`` too), else None."""
    at = _command_at(argv)
    if at is None or argv[at] != "checkpoint":
        return None
    opts = {"json": False, "store": None, "config": None, "allow_deletions": False, "debug": False}
    args = iter(argv[:at] + argv[at + 1:])
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg == "--json":
            opts["json"] = True
        elif arg == "--allow-deletions":
            opts["allow_deletions"] = True   # an idle checkpoint deletes nothing
        elif arg == "--debug":
            opts["debug"] = True   # an idle checkpoint fails nothing
        elif name in ("--store", "--config"):
            value = value if eq else next(args, None)
            if not value or opts[name[2:]] is not None:
                return None
            opts[name[2:]] = value
        else:  # --wait, --help, anything new: the full command handles it
            return None
    return opts


def _command_at(argv: list[str]) -> int | None:
    """Where the command is in ``argv``, past the options of ``_GLOBAL`` (each value
    of ``--store`` and ``--config`` with them); None when anything else comes first."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        name, eq, _ = argv[i].partition("=")
        if name not in _GLOBAL or (eq and name in ("--json", "--debug")):
            return None
        i += 2 if name in ("--store", "--config") and not eq else 1
    return i if i < len(argv) else None


def _quiet_checkpoint(opts: dict):
    """The quiet snapshot when it proves nothing changed, else None."""
    from .. import paths
    from ..local import quiet

    env = os.environ
    source, named = paths.config_source(opts["config"], env)
    if (named or os.path.exists(source)) and not env.get("JOURNAL_STATE_DIR"):
        return None  # the config file may name the state directory: let the full path read it
    state_dir = paths.state_dir(env, None, paths.abs_path(env.get("AM_LOCAL")))
    try:
        mode = os.stat(state_dir).st_mode
        if mode & 0o077 and not mode & 0o1000:
            return None  # an earlier version's state directory: the full command tightens it (local/private.py)
        lock = os.open(os.path.join(state_dir, paths.LOCK_FILE), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        import fcntl

        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # a checkpoint or restore is running: the full command reports it
        inputs = paths.inputs_key(opts["config"], env, opts["store"], None)
        proven = quiet.idle_result(state_dir, os.path.join(state_dir, paths.STATE_FILE), inputs=inputs, fork=True)
        if proven is not None:  # a successful run, for `journal status` (local/activity.py)
            try:
                os.utime(os.path.join(state_dir, paths.ACTIVITY_DIR, paths.ACTIVITY_OK))
            except OSError:
                pass
        return proven
    finally:
        os.close(lock)
