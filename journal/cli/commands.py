"""The commands of ``journal``; see ``cli/app.py`` for the shared plumbing."""

from __future__ import annotations

import os
import sys

import click

from .app import (EXIT_FALLBACK, MOMENT, CliReporter, common, durable_url, echo, emit_json, handle_errors, main,
                  open_context)

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
    from ..errors import NoStore
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
    echo(f"store {cfg.store} ready (id {repo.store_id}"
         + (f", encrypted; opened with {key.describe()})" if repo.codec.encrypted else ")"))
    if other is not None:
        echo(f"note: this machine still follows store {other.store_id} (it knew checkpoint {other.seq} "
             f"there) and goes on checkpointing to it; to follow this store instead, run `journal takeover` "
             f"with this store configured", err=True)


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
@click.option("--dry-run", is_flag=True, help="Print what would be done; change nothing.")
def restore(config_path, store_url, as_json, at, rollback, to_dir, replace, dry_run):
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

    Example:

        journal restore --at 42 --to /tmp/export --dry-run

        journal restore --at 42 --rollback
    """
    from ..restore.run import restore as run_restore
    from ..paths import shown

    if replace and to_dir is None:
        from ..errors import ConfigError
        raise ConfigError("restore: --replace replaces an earlier export; add --to DIR (a live restore never "
                          "deletes local files)")
    cfg, store = open_context(config_path, store_url, writes=to_dir is None and not dry_run)
    reporter = CliReporter("restoring", quiet=as_json)
    result = run_restore(cfg, store, reporter, at=at, to=to_dir, dry_run=dry_run, replace=replace,
                         rollback=rollback)
    if as_json:
        emit_json(result)
    else:
        from .render import restored_line

        if not result.trees:
            echo("nothing to restore: the store has no checkpoint of a configured tree")
        for t in result.trees:
            if t.error:
                echo(f"{t.name}: FAILED: {t.error}")
                continue
            echo(restored_line(t, dry_run))
            for path in t.lost:
                why = f"refused: {t.refused[path]}" if path in t.refused else "no good copy in any checkpoint"
                echo(f"{t.name}: LOST {shown(path)}: {why}")
            for path in t.uncreatable:
                echo(f"{t.name}: LOST {shown(path)}: too long a path to create under {t.dest}")
            for path in t.removed:
                echo(f"{t.name}: {'would take out' if dry_run else 'took out'} {shown(path)} (not in "
                     f"checkpoint {t.seq})")
        for w in result.warnings:
            echo(f"warning: {w}", err=True)
        would = "dry run, nothing was changed: the restore would be" if dry_run else "restore"
        if not result.complete:
            echo(f"{would} INCOMPLETE", err=True)
        elif result.fallback:
            notes = "; ".join(result.fallback_notes())
            echo(f"{would} complete from a FALLBACK (exit {EXIT_FALLBACK}): {notes}")
        else:
            echo(f"{would} complete")
    if not result.complete:
        sys.exit(1)
    if result.fallback:
        sys.exit(EXIT_FALLBACK)


@main.command()
@common
@click.option("--full", is_flag=True, help="Also read and re-hash every object.")
def verify(config_path, store_url, as_json, full):
    """Audit the store: exit 0 when clean, 1 with findings.

    Example:

        journal verify --full --json
    """
    from ..repository.lineage import open_existing
    from ..verify import verify as run_verify

    cfg, store = open_context(config_path, store_url)
    result = run_verify(open_existing(store, cfg.state_dir, audit=True, key=cfg.key),
                        CliReporter("verifying", quiet=as_json), full=full)
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
    from ..config import DEFAULT_JSONL, no_trees_hint

    cfg, _ = open_context(config_path, store_url)
    if as_json:
        emit_json(cfg)
        return
    echo(f"config:    {cfg.source or '(none: presets only)'}")
    echo(f"store:     {cfg.store}{' (the default: JOURNAL_STORE is not set)' if cfg.default_store else ''}")
    echo(f"local:     {cfg.local or '(unset: set AM_LOCAL)'}")
    echo(f"state dir: {cfg.state_dir}")
    echo(f"interval:  {cfg.interval:g}s")
    echo(f"inputs:    at most {cfg.input_limit:,} bytes each; socket {cfg.input_socket}")
    if not cfg.trees:
        echo(f"trees:     none: {no_trees_hint(cfg, in_trees=True)}")
    for t in cfg.trees:
        extra = f"  exclude {', '.join(t.exclude)}" if t.exclude else ""
        jsonl = [p for p in t.jsonl if p not in DEFAULT_JSONL]   # every tree reads *.jsonl and *.ndjson so
        if jsonl:
            extra += f"  jsonl {', '.join(jsonl)}"
        if t.sqlite:
            extra += f"  sqlite {', '.join(t.sqlite)}"
        echo(f"  {t.name:10} {t.path}{extra}")


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
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def supervise(config_path, store_url, as_json, interval, grace, no_restore, no_input_socket, metrics_file,
              pass_key_env, verbose, quiet, log_format, cmd):
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
    from ..config import check_interval, load_config, parse_duration
    from ..errors import ConfigError
    from ..store import open_store
    from ..supervise.events import Level
    from ..supervise.run import Supervisor
    from .supervise_log import LogFormat, SuperviseLog

    if verbose and quiet:
        raise ConfigError("supervise: -v and -q ask for more and for less; give one of them")
    if interval is not None:
        interval = check_interval(parse_duration(interval, "--interval"), "--interval")
    grace = parse_duration(grace, "--grace")
    if metrics_file is not None:
        from ..supervise.metrics import check_metrics_file

        metrics_file = check_metrics_file(metrics_file)
    cfg = load_config(config_path, store=store_url)
    durable_url(cfg.store)
    sup = Supervisor(cfg, lambda: open_store(cfg.store, make_parents=cfg.default_store), list(cmd),
                     interval=interval or cfg.interval, grace=grace, restore_first=not no_restore,
                     log=SuperviseLog(Level.DEBUG if verbose else Level.ERROR if quiet else Level.INFO,
                                      LogFormat(log_format)),
                     serve_inputs=not no_input_socket, metrics_file=metrics_file, pass_key_env=pass_key_env)
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
    It also shows the bytes the state directory holds, and those of its caches
    (chunks, sqlite-base, maps, pages).

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
    if result.seq:
        echo(f"took over store {result.store_id} after checkpoint {result.seq} ({result.previous_writer}); "
             "the next `journal checkpoint` publishes this container's files")
    else:
        echo(f"took over store {result.store_id}, which holds no checkpoint; the next `journal checkpoint` "
             "publishes this container's files as checkpoint 1")
    if result.left_store is not None:
        echo(f"this machine no longer follows store {result.left_store} (it knew checkpoint {result.left_seq} "
             "there); that store is left as it is")
    elif result.left_seq is not None:
        gone = (f"checkpoint {result.left_seq}" if result.left_seq == result.seq + 1
                else f"checkpoints {result.seq + 1}-{result.left_seq}")
        echo(f"{gone}, which this machine knew, {'is' if result.left_seq == result.seq + 1 else 'are'} not in the "
             "store any more; left behind")


@main.command("gc")
@common
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--keep-last", type=click.IntRange(min=0), help="Keep the newest N checkpoints.")
@click.option("--keep-within", metavar="DURATION", help="Keep checkpoints newer than this (seconds, or 30m, 24h, 7d).")
@click.option("--keep-hourly", type=click.IntRange(min=0), help="Keep the newest checkpoint of each of the last N hours.")
@click.option("--keep-daily", type=click.IntRange(min=0), help="Keep the newest checkpoint of each of the last N days.")
@click.option("--grace", default="24h", show_default=True, metavar="DURATION",
              help="Delete only what was tombstoned at least this long ago (seconds, or 30m, 24h, 7d).")
@click.option("--keep-inputs-within", metavar="DURATION",
              help="Expire delivered inputs submitted longer ago than this (seconds, or 30m, 24h, 7d; default: keep every input).")
@click.option("--include-undelivered", is_flag=True,
              help="With --keep-inputs-within: expire undelivered inputs too.")
def gc_command(config_path, store_url, as_json, dry_run, keep_last, keep_within, keep_hourly, keep_daily, grace,
               keep_inputs_within, include_undelivered):
    """Expire old checkpoints and delete what nothing needs, in two phases.

    Mark: unkept checkpoints and unreachable packs get a tombstone. Sweep: what a
    tombstone older than --grace names is deleted, unless a checkpoint present now
    needs it. A run sweeps only tombstones that were there when it started, so what
    it marks is deleted by a later run (the next one, with --grace 0); it says so.
    The newest checkpoint of every tree is always kept. With no --keep-* option gc
    refuses: it never guesses what to keep. Stored inputs expire only with
    --keep-inputs-within (delivered ones; every one with --include-undelivered), by
    the same two phases; each session's newest input always stays;
    --keep-inputs-within alone keeps every checkpoint.

    Example:

        journal gc --keep-daily 7 --keep-last 20 --dry-run
    """
    from ..errors import ConfigError
    from ..gc.inputs import InputPolicy
    from ..gc.run import gc as run_gc
    from ..repository.lineage import open_existing
    from ..config import parse_duration
    from ..gc.retention import Policy

    policy = Policy(keep_last=keep_last, keep_hourly=keep_hourly, keep_daily=keep_daily,
                    keep_within=parse_duration(keep_within, "--keep-within") if keep_within else None)
    inputs = InputPolicy(include_undelivered=include_undelivered, keep_within=parse_duration(
        keep_inputs_within, "--keep-inputs-within") if keep_inputs_within else None)
    if include_undelivered and inputs.is_empty():
        raise ConfigError("gc: --include-undelivered expires undelivered inputs older than --keep-inputs-within; "
                          "add --keep-inputs-within DURATION")
    if policy.is_empty() and inputs.is_empty():
        raise ConfigError("gc: no retention policy given; pass at least one of --keep-last N, "
                          "--keep-within DURATION, --keep-hourly N, --keep-daily N, --keep-inputs-within DURATION")
    cfg, store = open_context(config_path, store_url, writes=not dry_run)
    seconds = parse_duration(grace, "--grace")
    plan, result = run_gc(open_existing(store, cfg.state_dir, key=cfg.key), policy, seconds, dry_run=dry_run,
                          reporter=CliReporter("deleting", quiet=as_json), inputs=inputs)
    grace = grace.strip() + ("s" if grace.strip()[-1:].isdigit() else "")
    if as_json:
        emit_json({"dry_run": dry_run, "plan": plan, "result": result})
        return
    from .render import gc_lines

    for line in gc_lines(plan, result, dry_run, grace):
        echo(line)
