"""The ``journal`` click group and what every command shares: options, errors, rendering.

The commands live in their own modules and register on ``main``; ``entry`` gathers them.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys

import click
import msgspec

from .. import __version__
from ..config import load_config
from ..errors import CheckpointErrors, ConfigError, JournalError, describe_os_error
from ..format.model import FORMAT
from .output import INTERRUPTED, OutputClosed, interrupted, output_closed, wants_json
from ..report import Reporter
from ..store import open_store

EXIT_FINDINGS = 1
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_FALLBACK = 3   # restore: complete, but some tree or file came from an older checkpoint than the newest


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
            click.echo(f"warning: {message}", err=True)

    def note(self, message: str) -> None:
        if not self.quiet:
            click.echo(message, err=True)

    def progress(self, done: int, total: int) -> None:
        if self.quiet or not sys.stderr.isatty() or total < 50:
            return
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)
        if done >= total:
            self._bar.__exit__(None, None, None)
            self._bar = None


def emit_json(value) -> None:
    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2))


def handle_errors(fn):
    """Turn library errors into one clear line and a non-zero exit; with ``--json``,
    also a JSON object on stdout, so a script always gets JSON."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with past_click():
                return fn(*args, **kwargs)
        except ConfigError as err:
            fail(err, EXIT_USAGE, kwargs.get("as_json"))
        except JournalError as err:
            fail(err, EXIT_ERROR, kwargs.get("as_json"))
        except OSError as err:  # a local path the library did not expect to fail
            fail(describe_os_error(err), EXIT_ERROR, kwargs.get("as_json"), kind="OSError")
    return wrapper


@contextlib.contextmanager
def past_click():
    """A write to a stdout (or stderr) whose reader went away (``journal log | head -1``)
    ends the command quietly at the launcher (``launch.main``), with exit 141: raise it
    as ``OutputClosed``, which neither ``handle_errors`` nor click (which would exit 1)
    takes for an error. Any other ``BrokenPipeError`` stays an error."""
    try:
        yield
    except BrokenPipeError:
        if not output_closed():
            raise
        raise OutputClosed from None


def fail(err, code: int, as_json: bool | None, kind: str | None = None):
    """Print one error line (and the JSON error object) and exit with ``code``. What a
    backend said in full (an error's ``backend_said``) follows with ``--debug``, and is
    the JSON object's ``detail``."""
    message = str(err)
    detail = getattr(err, "backend_said", None) if isinstance(err, Exception) else None
    click.echo(f"journal: error: {message}", err=True)
    ctx = click.get_current_context(silent=True)
    if detail and ctx is not None and ctx.meta.get(DEBUG):
        click.echo(f"journal: debug: {detail}", err=True)
    if as_json:
        doc = {"error": message, "kind": kind or type(err).__name__, "exit": code}
        if isinstance(err, CheckpointErrors):
            doc.update(seq=err.seq, errors=err.errors)
        if detail:
            doc["detail"] = detail
        emit_json(doc)
    sys.exit(code)


DEBUG = "journal.debug"


def _debug(ctx, _param, value) -> None:
    if value:
        ctx.meta[DEBUG] = True


def common(fn):
    """--config, --store, --json and --debug, shared by every command."""
    fn = click.option("--debug", is_flag=True, expose_value=False, envvar="JOURNAL_DEBUG", callback=_debug,
                      help="On an error, also print in full what the store or system said ($JOURNAL_DEBUG=1).")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(fn)
    fn = click.option("--store", "store_url", metavar="URL", help="Store path or URL (overrides $JOURNAL_STORE).")(fn)
    fn = click.option("--config", "config_path", metavar="FILE", type=click.Path(dir_okay=False),
                      help="Config file (else $JOURNAL_CONFIG, else ~/.config/journal/config.toml).")(fn)
    return handle_errors(fn)


def open_context(config_path, store_url):
    cfg = load_config(config_path, store=store_url)
    return cfg, open_store(durable_url(cfg.store), make_parents=cfg.default_store)


def durable_url(url: str) -> str:
    """Refuse ``memory://`` on the command line: each command would get a new, empty store."""
    if url.lower().startswith("memory://"):
        raise ConfigError("open store: memory:// keeps nothing between commands (it is for tests); "
                          "set JOURNAL_STORE to a path or a cloud URL")
    return url


class OneLineGroup(click.Group):
    """Usage errors (a bad flag value, a missing argument) are one line too, and with
    ``--json`` a JSON error object, even when click could not parse the command line.

    ``lazy`` names commands whose module (of ``journal.cli``) registers them only when
    one of them runs, or when ``journal --help`` lists them all (``entry``): a
    ``journal checkpoint`` does not import what only ``journal ls`` needs."""

    lazy: dict[str, str] = {}

    def list_commands(self, ctx):
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx, name):
        if name not in self.commands and name in self.lazy:
            importlib.import_module(f"{__package__}.{self.lazy[name]}")  # registers its commands on ``main``
        return super().get_command(ctx, name)

    def main(self, args=None, *rest, **kwargs):
        kwargs["standalone_mode"] = False
        if not rest:  # `python -m journal` too: "Usage: journal ...", and completion reads $_JOURNAL_COMPLETE
            kwargs.setdefault("prog_name", "journal")
        as_json = wants_json(list(sys.argv[1:] if args is None else args))
        try:
            return super().main(args, *rest, **kwargs)
        except click.UsageError as err:
            message = err.format_message()
            if "\n" in message:  # `journal` alone: the help text is the message
                click.echo(message, err=True)
                sys.exit(EXIT_USAGE)
            where = f"; see `{err.ctx.command_path} --help`" if err.ctx else ""
            fail(f"{message.rstrip('.')}{where}", EXIT_USAGE, as_json, kind="UsageError")
        except click.ClickException as err:
            fail(err.format_message(), err.exit_code, as_json, kind=type(err).__name__)
        except click.Abort:
            interrupted(as_json)
            sys.exit(INTERRUPTED)

    def make_context(self, *args, **kwargs):   # `journal --help`, `--version` print here
        with past_click():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):   # every command, its --help included
        with past_click():
            return super().invoke(ctx)


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="journal",
                      message=f"%(prog)s, version %(version)s (store format {FORMAT})")
def main():
    """Durable checkpoints of AI coding-agent state in disposable containers.

    Agents write to local disk ($AM_LOCAL); journal copies closed, content-addressed
    objects to the store ($JOURNAL_STORE) and restores them on the next start.
    """
