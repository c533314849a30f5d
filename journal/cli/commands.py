"""The commands of ``journal``; see ``cli/app.py`` for the shared plumbing."""

from __future__ import annotations

import os
import sys

import click

from .app import (EXIT_FALLBACK, MOMENT, CliReporter, common, durable_url, echo, emit_json, handle_errors, main,
                  open_context)
from .options import SuperviseOptions, gathered

# Operations are imported inside each command, so `journal checkpoint` (run by cron or
# a timer every few seconds) loads only what it uses.


@main.command()
@common
@click.option("--encrypt", is_flag=True,
              help="Create an encrypted store: its key comes from --key-file, $JOURNAL_KEY_FILE or "
                   "$JOURNAL_PASSPHRASE (a new store is encrypted whenever a key is set).")
@click.option("--key-file", metavar="PATH",
              help="The key file (with --encrypt, 32 random bytes, mode 0600, are written there when it is "
                   "absent); later commands name it in $JOURNAL_KEY_FILE or `key_file`.")
def init(config_path, store_url, as_json, encrypt, key_file):
    """Create the store if it is absent or empty (idempotent).

    Only creates the store: the store this machine follows never changes here (a
    running supervisor goes on with its own). `journal takeover` follows another store.

    Example:

        JOURNAL_STORE=/data/journal journal init

        journal init --encrypt --key-file ~/.config/journal/store.key
    """
    from ..config import KeySource
    from ..repository.errors import NoStore
    from ..repository.lineage import followed
    from ..repository.repository import Repository

    cfg, store = open_context(config_path, store_url, writes=True)
    key = KeySource(file=os.path.abspath(os.path.expanduser(key_file)), origin="--key-file") if key_file else cfg.key
    made = False
    try:
        repo = Repository.open(store, key=key, encrypt=encrypt)
    except NoStore:
        if encrypt and key is not None and key.file is not None:
            from ..crypto.keys import create_key_file

            made = create_key_file(key.file)
        repo = Repository.open(store, create=True, key=key, encrypt=encrypt)
    other = followed(cfg.state_dir, repo)   # only said: init never re-points this machine
    if made:
        from .keys import keep_copy_note

        echo(keep_copy_note(key), err=True)
    if as_json:
        emit_json({"store": cfg.store, "store_id": repo.store_id, "created": repo.info.created,
                   "encrypted": repo.codec.encrypted, "key": key.describe() if repo.codec.encrypted else None,
                   "key_file_created": made,
                   "followed_store": other.store_id if other else None})
        return
    from .render import init_lines

    for line, err in init_lines(cfg.store, repo, key, other):
        echo(line, err=err)


@main.command()
@common
@click.option("--allow-deletions", is_flag=True, help="Drop files that vanished even when most of a tree did.")
@click.option("--wait", is_flag=True, help="Wait for a running checkpoint instead of failing.")
def checkpoint(config_path, store_url, as_json, allow_deletions, wait):
    """Take one checkpoint of every configured tree.

    Only new complete JSONL lines and changed files are uploaded, then the
    manifest, last. An idle checkpoint writes nothing.

    Example:

        AM_LOCAL=/home/node/local JOURNAL_STORE=/data/journal journal checkpoint
    """
    from .tick import checkpoint_command

    checkpoint_command(config_path, store_url, as_json, allow_deletions=allow_deletions, wait=wait)


@main.command()
@common
@click.option("-n", "--limit", type=click.IntRange(min=0), default=None, help="Show only the newest N checkpoints.")
def log(config_path, store_url, as_json, limit):
    """List checkpoints in the store, newest first.

    Example:

        journal log -n 10
    """
    from ..repository.history import list_history
    from ..repository.lineage import open_existing

    cfg, store = open_context(config_path, store_url)
    entries = list_history(open_existing(store, cfg.state_dir, key=cfg.key), limit)
    if as_json:
        emit_json(entries)
        return
    from .render import log_lines

    for line in log_lines(entries):
        echo(line)


@main.command()
@common
@click.option("--at", metavar="SEQ|TIME",
              help=f"Restore this checkpoint: {MOMENT}; a time means the newest checkpoint at or before it. Onto "
                   "the live trees it needs --rollback.")
@click.option("--rollback", is_flag=True,
              help="With --at: make the live trees exactly that checkpoint; local work it lacks is kept as a "
                   "fork first.")
@click.option("--to", "to_dir", metavar="DIR",
              help="Write every stored tree under DIR/<tree> instead of the live paths; DIR must be "
                   "absent or empty.")
@click.option("--replace", is_flag=True,
              help="With --to: replace an earlier export in DIR (only the trees it wrote; anything else "
                   "in DIR is refused, never deleted).")
@click.option("--include", "include", multiple=True, metavar="PATTERN",
              help="Restore only the paths PATTERN matches (repeatable): TREE/PATH as `journal ls` shows it; a "
                   "directory takes everything under it; '*' stops at '/', '**' crosses it ('**/*.db').")
@click.option("--dry-run", is_flag=True, help="Print what would be done; change nothing.")
def restore(config_path, store_url, as_json, at, rollback, to_dir, replace, include, dry_run):
    """Restore the newest valid checkpoint into the live trees.

    On a hot restart (the newest checkpoint is this disk's last) newer local files are
    kept. When the store moved on under another writer, or with --at N --rollback, the
    local work that checkpoint lacks is kept in the store as a fork first, then the
    live trees become that checkpoint. Damaged objects fall back to older copies. Exits 1,
    without the restore-complete marker, if any file could not be rebuilt; exits 3
    when the restore is complete but a tree or file came from an older checkpoint
    than the newest (a fallback past damage). An export (--to DIR) holds exactly the
    checkpoint asked for: DIR must be empty, or hold an earlier export and --replace
    be given.

    --include restores only the paths its patterns match, into DIR or the live trees
    (a stale disk and --at are refused there: they need whole trees). Onto a fresh
    container it leaves the restore incomplete: `journal checkpoint` refuses until a
    whole `journal restore` ran, so the paths it did not restore are never published
    as deleted. A pattern that matches nothing exits 2 and writes nothing.

    Example:

        journal restore --at 42 --to /tmp/export --dry-run

        journal restore --at 42 --rollback

        journal restore --to /tmp/one --include 'codex/sessions/**/rollout-*.jsonl'
    """
    from ..restore.run import restore as run_restore

    if replace and to_dir is None:
        from ..errors import ConfigError
        raise ConfigError("restore: --replace replaces an earlier export; add --to DIR (a live restore never "
                          "deletes local files)")
    cfg, store = open_context(config_path, store_url, writes=to_dir is None and not dry_run)
    reporter = CliReporter("restoring", quiet=as_json)
    result = run_restore(cfg, store, reporter, at=at, to=to_dir, dry_run=dry_run, replace=replace,
                         rollback=rollback, include=list(include))
    if as_json:
        emit_json(result)
    else:
        from .render import restore_lines

        for line, err in restore_lines(result):
            echo(line, err=err)
    if not result.complete:
        sys.exit(1)
    if result.fallback:
        sys.exit(EXIT_FALLBACK)


@main.command()
@common
@click.option("--full", is_flag=True, help="Also read and re-hash every object.")
@click.option("--sample", type=click.FloatRange(0, 100, min_open=True), metavar="PERCENT",
              help="Check PERCENT of the packs by content, as --full does every pack: drawn at random, a new draw "
                   "each run (its seed is printed).")
@click.option("--seed", type=int, metavar="N", help="With --sample: draw the packs with seed N (the same N, the "
                                                     "same packs).")
def verify(config_path, store_url, as_json, full, sample, seed):
    """Audit the store: exit 0 when clean, 1 with findings.

    Example:

        journal verify --full --json

        journal verify --sample 5 --seed 1
    """
    from ..repository.lineage import open_existing
    from ..verify import verify as run_verify

    if seed is not None and sample is None:
        raise click.UsageError("--seed chooses the packs --sample checks; add --sample PERCENT")
    if full and sample is not None:
        raise click.UsageError("--full checks every pack and --sample a share of them; give one of them")
    cfg, store = open_context(config_path, store_url)
    result = run_verify(open_existing(store, cfg.state_dir, audit=True, key=cfg.key),
                        CliReporter("verifying", quiet=as_json), full=full, sample=sample, seed=seed)
    if as_json:
        emit_json({"ok": result.ok, **{f: getattr(result, f) for f in result.__struct_fields__}})
    else:
        from .render import verify_lines

        for line in verify_lines(result):
            echo(line)
    if not result.ok:
        sys.exit(1)


@main.command()
@common
def trees(config_path, store_url, as_json):
    """Print the effective configuration: store, local root, trees.

    Config file format (TOML):

    \b
        store = "/data/journal"
        local = "/home/node/local"
        presets = ["codex", "claude"]      # default: every preset whose path exists
        [[trees]]
        name = "notes"
        path = "notes"                     # relative to local
        exclude = ["*.tmp", "cache/"]
        jsonl = ["*.log"]

    Example:

        journal trees --json
    """
    cfg, _ = open_context(config_path, store_url)
    if as_json:
        emit_json(cfg)
        return
    from .render import trees_lines

    for line in trees_lines(cfg):
        echo(line)


@main.command()
@click.option("--dir", "workdir", type=click.Path(file_okay=False), help="Work here instead of a temp dir (kept).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@handle_errors
def demo(workdir, as_json):
    """Run the whole loop on a generated agent-state tree and a local store.

    Checkpoints while a child appends to a transcript it holds open, kills the
    child with SIGKILL, wipes the live tree, restores and verifies.

    Example:

        journal demo
    """
    from .demo import run_demo

    result = run_demo(workdir, CliReporter(quiet=as_json))
    if as_json:
        emit_json(result)
    else:
        for line in result.lines:
            echo(line)
    if not result.ok:
        sys.exit(1)


# Options end at CMD (or at `--`): CMD's own options are never read as ours, and an
# unknown option before CMD is a usage error, not a command to run.
@main.command(context_settings={"allow_interspersed_args": False})
@common
@click.option("--interval", metavar="DURATION", default=None,
              help="Time between checkpoints, seconds or 30s, 2m (else $AGENT_STATE_CHECKPOINT_SECONDS, config, 15).")
@click.option("--grace", metavar="DURATION", default="1", show_default=True,
              help="Time to wait for CMD after forwarding a stop signal (seconds, or 2s, 1m).")
@click.option("--no-restore", is_flag=True, help="Skip the startup restore (only when you mean it).")
@click.option("--no-input-socket", is_flag=True,
              help="Do not serve the input journal's socket ($JOURNAL_INPUT_SOCKET) for CMD.")
@click.option("--no-watch", is_flag=True,
              help="Check every path at every tick instead of trusting inotify for directories where nothing "
                   "happened (by default a sixteenth of the paths is checked in full at each tick).")
@click.option("--metrics-file", metavar="FILE",
              help="Write Prometheus text-format metrics to FILE after every tick (replaced atomically).")
@click.option("--pass-key-env", is_flag=True,
              help="Pass $JOURNAL_PASSPHRASE, $JOURNAL_KEY_FILE and $JOURNAL_NEW_PASSPHRASE on to CMD "
                   "(by default CMD runs without them).")
@click.option("-v", "--verbose", is_flag=True, help="Also log each checkpoint that committed, skipped ticks and notes.")
@click.option("-q", "--quiet", is_flag=True, help="Log errors only.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, envvar="JOURNAL_LOG_FORMAT",
              help="How the log lines on stderr are written: text, or one JSON object per line for a log "
                   "collector ($JOURNAL_LOG_FORMAT).")
@click.option("--copy-to", metavar="URL", envvar="JOURNAL_COPY_TO",
              help="Also copy the store to URL on a timer, each time `journal copy --to URL` in a process of its "
                   "own ($JOURNAL_COPY_TO); the target's key: $JOURNAL_TO_KEY_FILE or $JOURNAL_TO_PASSPHRASE.")
@click.option("--copy-every", metavar="DURATION", envvar="JOURNAL_COPY_EVERY",
              help="Time from the start of one copy (--copy-to) to the start of the next, e.g. 30m, 1h "
                   "($JOURNAL_COPY_EVERY, else 1h). The first starts with CMD.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@gathered(SuperviseOptions)
def supervise(config_path, store_url, as_json, opts: SuperviseOptions):
    """Restore, run CMD, checkpoint on a timer, and take a final checkpoint on exit.

    Use it as a container's PID 1, with a store named (--store, $JOURNAL_STORE or
    `store` in the config): it refuses the implicit default store, which lives on
    the container's own disk (exit 2). CMD never starts if the restore is incomplete
    (exit 1; 2 for a configuration error; 127 when CMD cannot run). It exits with
    CMD's status, 137 when CMD outlived --grace and was killed, or 128+N when signal
    N stopped it before CMD started. It logs on stderr
    one line at start (the store, what was restored into which trees, how long it
    took), one per error and per recovery, and one for the final checkpoint (-v: also
    each checkpoint; -q: errors only; --log-format json: JSON objects). With --json,
    a JSON summary (exit status, error, status file) is printed on stdout at exit.
    CMD finds the input journal's socket in
    $JOURNAL_INPUT_SOCKET (see `journal input --help`). CMD runs without the
    variables that open an encrypted store ($JOURNAL_PASSPHRASE, $JOURNAL_KEY_FILE,
    $JOURNAL_NEW_PASSPHRASE) unless --pass-key-env. --metrics-file writes the
    last checkpoint's time and seq, bytes and objects uploaded, tick duration,
    errors and skipped ticks in Prometheus's text format (for node_exporter's
    textfile collector).

    Example:

        journal supervise --interval 15 --metrics-file /run/journal.prom -- node server.js
    """
    from ..config import load_config
    from ..store import open_store
    from ..supervise.copying import COPY_EVERY_ENV, COPY_TO_ENV, copy_schedule
    from ..supervise.run import Supervisor
    from .supervise_log import LogFormat, SuperviseLog

    level, interval, grace = opts.level(), opts.interval_seconds(), opts.grace_seconds()
    metrics_file = opts.metrics_file
    if metrics_file is not None:
        from ..supervise.metrics import check_metrics_file

        metrics_file = check_metrics_file(metrics_file)
    cfg = load_config(config_path, store=store_url)
    durable_url(cfg.store)
    sup = Supervisor(cfg, lambda: open_store(cfg.store, make_parents=cfg.default_store), list(opts.cmd),
                     interval=interval or cfg.interval, grace=grace, restore_first=not opts.no_restore,
                     log=SuperviseLog(level, LogFormat(opts.log_format)), serve_inputs=not opts.no_input_socket,
                     metrics_file=metrics_file, pass_key_env=opts.pass_key_env, watch=not opts.no_watch,
                     copy=copy_schedule({COPY_TO_ENV: opts.copy_to, COPY_EVERY_ENV: opts.copy_every}))
    code = sup.run()
    if as_json:
        emit_json(sup.summary(code))
    sys.exit(code)


@main.command()
@common
def status(config_path, store_url, as_json):
    """Show the last checkpoint, run, error and restore, the lag, and the supervisor.

    Every checkpoint and restore records what it did, however it runs (cron, by
    hand, migrate, the supervisor); an error says whether a later run cleared it.
    It also shows the bytes the state directory holds, those of its caches
    (chunks, sqlite-base, maps, pages), and their share of the live trees.

    Example:

        journal status --json
    """
    from ..config import load_config
    from ..supervise.status import report_status

    cfg = load_config(config_path, store=store_url)
    rep = report_status(cfg.state_dir)
    if as_json:
        emit_json(rep)
        return
    from .render import status_lines

    for line in status_lines(rep):
        echo(line)


@main.command()
@common
def takeover(config_path, store_url, as_json):
    """Continue the store's history from this container's local files.

    After a manifest conflict: adopt the newest checkpoint as the parent without
    touching local files; the next checkpoint publishes the local view. Nothing in
    the store is deleted. (`journal restore` is the other way out.) Also the way to
    continue a store other than the one this machine followed, or one that lost
    checkpoints this machine knew: it says what it leaves behind.

    Example:

        journal takeover && journal checkpoint
    """
    from ..checkpoint.takeover import takeover as run_takeover

    cfg, store = open_context(config_path, store_url)
    result = run_takeover(cfg, store)
    if as_json:
        emit_json(result)
        return
    from .render import takeover_lines

    for line in takeover_lines(result):
        echo(line)
