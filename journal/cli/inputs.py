"""``journal input``: submitted prompts, stored durably before they are delivered."""

from __future__ import annotations

import sys

import click

from .app import CliReporter, common, durable_url, echo, emit_json, main
from .base import default_store_warning
from .output import count
from ..errors import ConfigError
from ..inputs.errors import InputTooLarge
from ..os_errors import describe_os_error


@main.group("input")
def input_group():
    """The input journal: every submitted prompt, durable before it is delivered.

    Each input is one immutable object in the store, numbered in its session.
    `journal supervise` serves the same operations on a Unix socket
    ($JOURNAL_INPUT_SOCKET) for a server that must not start Python per prompt.

    Example:

        journal input list --undelivered
    """


def _open(config_path, store_url, *, create: bool, quiet: bool, writes: bool = False):
    from ..config import load_config
    from ..inputs.log import open_log

    cfg = load_config(config_path, store=store_url)
    durable_url(cfg.store)
    if writes:
        default_store_warning(cfg)
    return cfg, lambda: open_log(cfg, create=create, reporter=CliReporter(quiet=quiet))


@input_group.command("append")
@common
@click.option("--harness", required=True, help="The harness the prompt is for (codex, claude, ...).")
@click.option("--session", required=True, help="The session it belongs to; sequence numbers count per session.")
@click.option("--pane", help="The pane it was typed in (optional).")
@click.option("--client-id", help="The sender's id for this prompt: a retry with the same id stores nothing new.")
@click.option("--file", "file_path", metavar="F", type=click.Path(dir_okay=False),
              help="Read the text from F (or give - to read standard input).")
@click.argument("stdin", required=False, metavar="[-]")
def append(config_path, store_url, as_json, harness, session, pane, client_id, file_path, stdin):
    """Store one prompt; print its id and sequence once it is durable.

    The text is taken byte for byte from --file F or from standard input (-).
    A text over the input limit (1 MiB; `input_limit` in the config or
    $JOURNAL_INPUT_LIMIT) is refused with exit 2 and nothing is stored.

    Example:

        printf 'fix the build' | journal input append --harness codex --session S1 -
    """
    if (file_path is None) == (stdin is None) or stdin not in (None, "-"):
        raise ConfigError("input append: give the text as --file F or as - (standard input), one of the two")
    cfg, open_log = _open(config_path, store_url, create=True, quiet=as_json, writes=True)
    text = _read_text(file_path, cfg.input_limit)
    done = open_log().append(harness, session, text, pane=pane, client_id=client_id)
    if as_json:
        emit_json(done)
        return
    echo(f"{done.id} {done.seq}")
    if done.duplicate:
        echo(f"input append: client id {client_id!r} was stored already, as {done.id}; nothing new was stored",
             err=True)


def _read_text(path: str | None, limit: int) -> bytes:
    """The text, at most ``limit`` bytes; ``InputTooLarge`` (exit 2) past it, read no further."""
    if path is None:
        text = sys.stdin.buffer.read(limit + 1)
    else:
        try:
            with open(path, "rb") as fh:
                text = fh.read(limit + 1)
        except OSError as err:
            raise ConfigError(f"input append: cannot read {describe_os_error(err, path)}") from None
    if len(text) > limit:
        raise InputTooLarge(None, limit)
    return text


@input_group.command("list")
@common
@click.option("--harness", help="Only this harness's inputs.")
@click.option("--session", help="Only this session's inputs (with --harness).")
@click.option("--since", metavar="TIME", help="Only inputs submitted at or after TIME: an ISO-8601 time or date "
                                             "(UTC; a date from its start), or a duration ago (30m, 2h, 7d).")
@click.option("--undelivered", is_flag=True, help="Only inputs never marked delivered.")
def list_inputs(config_path, store_url, as_json, harness, session, since, undelivered):
    """List stored inputs by session and sequence.

    After a container restart, --undelivered shows what was submitted and never
    marked delivered, for the server to replay or show.

    Example:

        journal input list --undelivered --json
    """
    from ..repository.moment import parse_time

    if session is not None and harness is None:
        raise ConfigError("input list: --session needs --harness (a session belongs to a harness)")
    since_ns = parse_time(since, "input list", "--since").first_ns if since is not None else None
    _cfg, open_log = _open(config_path, store_url, create=False, quiet=as_json)
    found = open_log().list(harness=harness, session=session, since_ns=since_ns, undelivered=undelivered)
    if as_json:
        emit_json(list(found))
        return
    for info in found:
        where = f"{info.harness}/{info.session}" + (f" pane {info.pane}" if info.pane else "")
        state = "delivered" if info.delivered else "UNDELIVERED"
        echo(f"{info.id}  {info.submitted}  {count(info.size, 'byte'):>15}  {state:11}  {where}")


@input_group.command("show")
@common
@click.argument("input_id", metavar="ID")
def show(config_path, store_url, as_json, input_id):
    """Print one input's text, byte for byte, on standard output.

    With --json: what is known of it, and the text (as `text_base64` when it is
    not UTF-8).

    Example:

        journal input show codex.S1-0123456789abcdef0123/7
    """
    _cfg, open_log = _open(config_path, store_url, create=False, quiet=as_json)
    info, text = open_log().show(input_id)
    if as_json:
        from ..inputs.server import text_fields

        emit_json({**_builtins(info), **text_fields(text)})
        return
    sys.stdout.buffer.write(text)
    sys.stdout.buffer.flush()


def _builtins(value) -> dict:
    import msgspec

    return msgspec.to_builtins(value)


@input_group.command("mark-delivered")
@common
@click.argument("input_id", metavar="ID")
def mark_delivered(config_path, store_url, as_json, input_id):
    """Record that an input was delivered (a second immutable object; idempotent).

    Example:

        journal input mark-delivered codex.S1-0123456789abcdef0123/7
    """
    _cfg, open_log = _open(config_path, store_url, create=False, quiet=as_json, writes=True)
    done = open_log().mark_delivered(input_id)
    if as_json:
        emit_json(done)
    elif done.already:
        echo(f"{done.id} was delivered already, at {done.delivered_at}")
    else:
        echo(f"{done.id} delivered at {done.delivered_at}")


@input_group.command("serve")
@common
@click.option("--socket", "socket_path", metavar="PATH",
              help="The socket to serve (else $JOURNAL_INPUT_SOCKET, input_socket, <state dir>/input.sock).")
@click.option("--read-timeout", type=click.FloatRange(min=0, min_open=True), envvar="JOURNAL_INPUT_READ_TIMEOUT",
              metavar="SECONDS", help="Close a connection whose request line is not in full within SECONDS of its "
                                      "first byte (default 30; $JOURNAL_INPUT_READ_TIMEOUT).")
@click.option("--ready-fd", type=int, hidden=True)
@click.option("--parent-pid", type=int, hidden=True)
def serve(config_path, store_url, as_json, socket_path, read_timeout, ready_fd, parent_pid):
    """Serve the input journal on a Unix socket, one JSON object per line.

    `journal supervise` runs this for CMD; run it yourself to serve inputs
    without supervise. It stops on SIGTERM or SIGINT. The protocol and the
    socket's limits are in the README ("The input journal").

    Example:

        journal input serve --socket /run/journal-input.sock
    """
    from ..paths import abs_path
    from ..inputs.server import READ_TIMEOUT, run_server

    cfg, open_log = _open(config_path, store_url, create=True, quiet=as_json, writes=True)
    run_server(open_log, abs_path(socket_path) or cfg.input_socket, CliReporter(quiet=as_json),
               ready_fd=ready_fd, parent_pid=parent_pid, read_timeout=read_timeout or READ_TIMEOUT)
