"""The ``journal`` click group and what every command shares: options, errors, rendering.

The commands live in their own modules and register on ``main``; ``entry`` gathers them.
What needs no click (the error renderer, JSON, the reporter, opening the store) is in
``base``, which the launcher uses too; it is re-exported here for the command modules.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import sys

import click

from .. import __version__
from ..errors import EXIT_ERROR, EXIT_USAGE, ConfigError
from ..format.model import FORMAT
from .base import (EXIT_FALLBACK, EXIT_FINDINGS, CliReporter, command_errors, durable_url, echo, emit_json, fail,
                   open_context, past_click)
from .output import INTERRUPTED, interrupted, wants_json

__all__ = ["EXIT_ERROR", "EXIT_FALLBACK", "EXIT_FINDINGS", "EXIT_USAGE", "MOMENT", "CliReporter", "common",
           "durable_url", "echo", "emit_json", "fail", "handle_errors", "main", "open_context"]

#: How every option naming a checkpoint or a time reads it (``repository/moment.py``).
MOMENT = ("a sequence number (a fork too), latest or latest~N (N main-line checkpoints back), an ISO-8601 time "
          "or date (UTC; a date is the whole day), or a duration ago (90m, 2h, 3d)")


def handle_errors(fn):
    """Turn library errors into one clear line and a non-zero exit; with ``--json``,
    also a JSON object on stdout, so a script always gets JSON (``base.command_errors``).
    The options given before the command (``GLOBAL``) are the command's own when it
    was not given them (``_take_global``)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context(silent=True)
        clash = _take_global(ctx, kwargs)
        with command_errors(kwargs.get("as_json"), debug=bool(ctx is not None and ctx.meta.get(DEBUG))):
            if clash is not None:
                raise ConfigError(clash)
            return fn(*args, **kwargs)
    return wrapper


DEBUG = "journal.debug"
#: ``ctx.meta`` key: ``--json``, ``--store`` and ``--config`` as given before the command.
GLOBAL = "journal.global"
_FLAGS = {"as_json": "--json", "store_url": "--store", "config_path": "--config"}


def _debug(ctx, _param, value) -> None:
    if value:
        ctx.meta[DEBUG] = True


def _take_global(ctx, kwargs: dict) -> str | None:
    """Give the command the options given before it (``journal --store URL ls``) that it
    was not given itself; the error for one given both before and after it with two
    values, or for one the command does not take (None: no such problem)."""
    given = ctx.meta.get(GLOBAL, {}) if ctx is not None else {}
    clash = None
    for name, value in given.items():
        flag, command, own = _FLAGS[name], ctx.command_path.partition(" ")[2], kwargs.get(name)
        if not value:
            continue
        if name not in kwargs:
            clash = clash or f"{command}: {flag} (given before the command) is not an option of this command; drop it"
        elif own and own != value:
            clash = clash or (f"{command}: {flag} is given twice, {value} before the command and {own} after it; "
                              "give it once")
        else:
            kwargs[name] = value   # --json too, so that a clash is reported as JSON
    return clash


def shared_options(fn):
    """--config, --store, --json and --debug: every command's, and ``journal``'s own
    (before the command)."""
    fn = click.option("--debug", is_flag=True, expose_value=False, envvar="JOURNAL_DEBUG", callback=_debug,
                      help="On an error, also print in full what the store or system said ($JOURNAL_DEBUG=1).")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(fn)
    fn = click.option("--store", "store_url", metavar="URL", help="Store path or URL (overrides $JOURNAL_STORE).")(fn)
    return click.option("--config", "config_path", metavar="FILE", type=click.Path(dir_okay=False),
                        help="Config file (else $JOURNAL_CONFIG, else ~/.config/journal/config.toml).")(fn)


def common(fn):
    """--config, --store, --json and --debug, shared by every command."""
    return handle_errors(shared_options(fn))


#: Words typed for a command that only reads, and that command: an unknown command's
#: hint names it, never a command that writes and is merely spelt alike (`journal
#: check` is not `journal checkpoint`).
SYNONYMS = {"check": "verify", "audit": "verify", "fsck": "verify", "validate": "verify", "history": "log",
            "list": "log", "config": "trees", "info": "status"}


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

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.NoSuchCommand as err:
            raise click.UsageError(f"No such command {err.command_name!r}.{self._hint(ctx, err.command_name)}",
                                   ctx) from None

    def _hint(self, ctx, name: str) -> str:
        """Which command was meant: the reading one a word names (``SYNONYMS``), else the
        commands spelt alike (every command, those registered on first use too)."""
        meant = [SYNONYMS[name.lower()]] if name.lower() in SYNONYMS else \
            difflib.get_close_matches(name, self.list_commands(ctx))
        return f" Did you mean {' or '.join(repr(m) for m in meant)}?" if meant else ""

    def make_context(self, *args, **kwargs):   # `journal --help`, `--version` print here
        with past_click():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):   # every command, its --help included
        with past_click():
            return super().invoke(ctx)


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="journal",
                      message=f"%(prog)s, version %(version)s (store format {FORMAT})")
@shared_options
@click.pass_context
def main(ctx, config_path, store_url, as_json):
    """Durable checkpoints of AI coding-agent state in disposable containers.

    Agents write to local disk ($AM_LOCAL); journal copies closed, content-addressed
    objects to the store ($JOURNAL_STORE) and restores them on the next start.

    --json, --store, --config and --debug go before the command or after it
    (`journal --json log` is `journal log --json`); given on both sides, they must
    agree. Times are UTC.
    """
    ctx.meta[GLOBAL] = {"config_path": config_path, "store_url": store_url, "as_json": as_json}
