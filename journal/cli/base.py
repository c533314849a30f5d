"""What every command does past its parsing, without click: print a line, print JSON,
report warnings, open the configuration and the store, and turn an error into one line
(its message, then the hints naming this command's options: ``hints``), its ``--debug``
detail, the ``--json`` error object and the exit status its class carries.

The click app (``app``) and the launcher (``launch``, which runs a busy plain ``journal
checkpoint`` without importing click) both use it: one renderer for both.
"""

from __future__ import annotations

import contextlib
import sys

from ..errors import EXIT_ERROR, ConfigError, JournalError
from ..checkpoint.errors import CheckpointErrors
from ..os_errors import describe_os_error
from ..paths import shown
from ..report import Reporter
from .output import OutputClosed, output_closed

EXIT_FINDINGS = 1   # verify: findings (every other failure is an error's own ``exit_code``: 1, or 2 for bad input)
EXIT_FALLBACK = 3   # restore: complete, but some tree or file came from an older checkpoint than the newest


def echo(message: str = "", err: bool = False) -> None:
    """One line to stdout (or stderr), flushed; nothing without a stream. Every line a
    command prints goes through here, and a line is one line: a control character in it
    (an escape sequence, a newline in a file name the library did not escape) or a byte
    that is not UTF-8 is written escaped (``paths.shown``, design §11.12), so nothing
    read from a tree or a store can drive the terminal or forge a line."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    stream.write((message if message.isprintable() else shown(message)) + "\n")
    stream.flush()


class CliReporter(Reporter):
    """Warnings to stderr; a progress bar on a TTY."""

    def __init__(self, label: str = "", quiet: bool = False):
        self.label = label
        self.quiet = quiet
        self.warnings: list[str] = []
        self._bar = None

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        if not self.quiet:
            echo(f"warning: {message}", err=True)

    def note(self, message: str) -> None:
        if not self.quiet:
            echo(message, err=True)

    def progress(self, done: int, total: int) -> None:
        if self.quiet or not sys.stderr.isatty() or total < 50:
            return
        if self._bar is None:
            import click   # only for a bar on a terminal

            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)
        if done >= total:
            self._bar.__exit__(None, None, None)
            self._bar = None


#: What JSON leaves raw that a terminal may obey: DEL and the C1 controls (U+0080-U+009F,
#: in UTF-8 0xC2 and a byte from 0x80 to 0x9F); they only occur inside JSON strings.
_RAW_CONTROLS = rb"\x7f|\xc2[\x80-\x9f]"


def emit_json(value) -> None:
    """``value`` as indented JSON, as bytes to stdout's buffer (as ``click.echo`` writes
    bytes), with no control character raw: JSON escapes C0 controls, this the rest."""
    import msgspec

    data = escape_controls(msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n")
    stream = sys.stdout
    if stream is None:
        return
    buffer = getattr(stream, "buffer", None)
    if buffer is None:   # a text-only stream (a test's StringIO)
        stream.write(data.decode())
        stream.flush()
        return
    stream.flush()
    buffer.write(data)
    buffer.flush()


def escape_controls(data: bytes) -> bytes:
    """JSON ``data`` with the controls JSON leaves raw (DEL, C1) escaped."""
    if b"\x7f" in data or b"\xc2" in data:
        import re

        data = re.sub(_RAW_CONTROLS, lambda m: b"\\u%04x" % ord(m.group().decode()), data)
    return data


@contextlib.contextmanager
def past_click():
    """A write to a stdout (or stderr) whose reader went away (``journal log | head -1``)
    ends the command quietly at the launcher (``launch.main``), with exit 141: raise it
    as ``OutputClosed``, which neither ``command_errors`` nor click (which would exit 1)
    takes for an error. Any other ``BrokenPipeError`` stays an error."""
    try:
        yield
    except BrokenPipeError:
        if not output_closed():
            raise
        raise OutputClosed from None


@contextlib.contextmanager
def command_errors(as_json: bool | None, debug: bool = False):
    """Turn library errors into one clear line and the exit status the error's class
    carries (``exit_code``), with the hint naming this command's option that fixes it
    (``hints.FLAG_HINTS``); with ``as_json``, also a JSON object on stdout, so a script
    always gets JSON (``fail``)."""
    try:
        with past_click():
            yield
    except JournalError as err:
        from .hints import with_flag_hint   # here: only a failed command needs the table

        fail(with_flag_hint(err), err.exit_code, as_json, debug=debug)
    except OSError as err:  # a local path the library did not expect to fail
        fail(describe_os_error(err), EXIT_ERROR, as_json, kind="OSError", debug=debug)


def fail(err, code: int, as_json: bool | None, kind: str | None = None, debug: bool = False):
    """Print one error line (and the JSON error object) and exit with ``code``. What a
    backend said in full (an error's ``backend_said``) follows with ``debug``
    (``--debug``), and is the JSON object's ``detail``."""
    message = "; ".join((str(err), *getattr(err, "hints", ())))
    detail = getattr(err, "backend_said", None) if isinstance(err, Exception) else None
    echo(f"journal: error: {message}", err=True)
    if detail and debug:
        echo(f"journal: debug: {detail}", err=True)
    if as_json:
        doc = {"error": message, "kind": kind or type(err).__name__, "exit": code}
        if isinstance(err, CheckpointErrors):
            doc.update(seq=err.seq, errors=err.errors)
        if detail:
            doc["detail"] = detail
        emit_json(doc)
    sys.exit(code)


def open_context(config_path, store_url, *, writes: bool = False):
    """The configuration and its store; a command that ``writes`` to the store says so
    when that store is the implicit default (``default_store_warning``)."""
    from ..config import load_config
    from ..store import open_store

    cfg = load_config(config_path, store=store_url)
    if writes:
        default_store_warning(cfg)
    return cfg, open_store(durable_url(cfg.store), make_parents=cfg.default_store)


def default_store_warning(cfg) -> None:
    """One line on stderr (whatever ``--json`` says) when a command writes to the
    implicit default store: nothing named a store, and this one lives on this disk."""
    if cfg.default_store:
        echo(f"warning: writing to the default store {cfg.store}, on this machine's own disk (fine to try journal "
             "out); name a store with --store URL, $JOURNAL_STORE or `store` in the config file", err=True)


def durable_url(url: str) -> str:
    """Refuse ``memory://`` on the command line: each command would get a new, empty store."""
    if url.lower().startswith("memory://"):
        raise ConfigError("open store: memory:// keeps nothing between commands (it is for tests); "
                          "set JOURNAL_STORE to a path or a cloud URL")
    return url
