"""The commands of ``journal``; see ``cli.py`` for the shared plumbing."""

from __future__ import annotations

import sys

import click

from .checkpoint import checkpoint as run_checkpoint
from .cli import CliReporter, common, emit_json, handle_errors, main, open_context
from .history import list_history
from .repository import Repository
from .restore import restore as run_restore
from .verify import verify as run_verify


@main.command()
@common
def init(config_path, store_url, as_json):
    """Create the store if it is absent or empty (idempotent).

    Example:

        JOURNAL_STORE=/data/journal journal init
    """
    cfg, store = open_context(config_path, store_url)
    repo = Repository.open(store, create=True)
    if as_json:
        emit_json({"store": cfg.store, "store_id": repo.store_id, "created": repo.info.created})
    else:
        click.echo(f"store {cfg.store} ready (id {repo.store_id})")


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
    cfg, store = open_context(config_path, store_url)
    result = run_checkpoint(cfg, store, CliReporter(quiet=as_json), allow_deletions=allow_deletions, wait=wait)
    if as_json:
        emit_json(result)
        return
    if result.seq is None and not result.objects:
        click.echo(f"idle: nothing changed in {len(result.trees)} tree(s); nothing written")
        return
    changed = sum(t.changed for t in result.trees)
    click.echo(f"checkpoint {result.seq}: {changed} file(s) changed, {result.objects} object(s), "
               f"{result.bytes:,} bytes in {result.seconds:.2f}s")


@main.command()
@common
@click.option("-n", "--limit", type=int, default=None, help="Show only the newest N checkpoints.")
def log(config_path, store_url, as_json, limit):
    """List checkpoints in the store, newest first.

    Example:

        journal log -n 10
    """
    cfg, store = open_context(config_path, store_url)
    entries = list_history(Repository.open(store), limit)
    if as_json:
        emit_json(entries)
        return
    click.echo(f"{'seq':>6}  {'time':24}  {'host':16} {'files':>7} {'bytes':>13} {'+bytes':>11} {'+obj':>5}")
    for e in entries:
        if e.error:
            click.echo(f"{e.seq:>6}  UNREADABLE: {e.error}")
        else:
            click.echo(f"{e.seq:>6}  {e.created:24}  {e.host[:16]:16} {e.files:>7} {e.bytes:>13,} "
                       f"{e.added_bytes:>11,} {e.added_objects:>5}")


@main.command()
@common
@click.option("--at", metavar="SEQ|ISO-TIME", help="Restore the newest checkpoint at or before this.")
@click.option("--to", "to_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Write every stored tree under DIR/<tree> instead of the live paths.")
@click.option("--dry-run", is_flag=True, help="Print what would be done; change nothing.")
def restore(config_path, store_url, as_json, at, to_dir, dry_run):
    """Restore the newest valid checkpoint into the live trees.

    Newer local files are kept; damaged objects fall back to older copies. Exits
    non-zero, without the restore-complete marker, if any file could not be rebuilt.

    Example:

        journal restore --at 42 --to /tmp/export --dry-run
    """
    cfg, store = open_context(config_path, store_url)
    reporter = CliReporter("restoring", quiet=as_json)
    result = run_restore(cfg, store, reporter, at=at, to=to_dir, dry_run=dry_run)
    if as_json:
        emit_json(result)
    else:
        verb = "would restore" if dry_run else "restored"
        if not result.trees:
            click.echo("nothing to restore: the store has no checkpoint of a configured tree")
        for t in result.trees:
            if t.error:
                click.echo(f"{t.name}: FAILED: {t.error}")
                continue
            acts = ", ".join(f"{n} {a}" for a, n in sorted(t.actions.items()))
            click.echo(f"{t.name}: {verb} from checkpoint {t.seq} into {t.dest}: {acts}; {t.bytes:,} bytes")
            for path in t.lost:
                click.echo(f"{t.name}: LOST {path}: no good copy in any checkpoint")
        for w in result.warnings:
            click.echo(w)
        click.echo("restore complete" if result.complete else "restore INCOMPLETE", err=not result.complete)
    if not result.complete:
        sys.exit(1)


@main.command()
@common
@click.option("--full", is_flag=True, help="Also read and re-hash every object.")
def verify(config_path, store_url, as_json, full):
    """Audit the store: exit 0 when clean, 1 with findings.

    Example:

        journal verify --full --json
    """
    cfg, store = open_context(config_path, store_url)
    result = run_verify(Repository.open(store), CliReporter("verifying", quiet=as_json), full=full)
    if as_json:
        emit_json({"ok": result.ok, **{f: getattr(result, f) for f in result.__struct_fields__}})
    else:
        for f in result.findings:
            where = f"manifest {f.manifest}" if f.manifest is not None else "store"
            click.echo(f"{f.kind}: {where}: {f.key}: {f.detail}")
        what = f"{result.manifests} manifest(s), {result.pages} page(s), {result.packs} pack(s)"
        if full:
            what += f", {result.blobs} blob(s) re-hashed"
        click.echo(f"{'ok' if result.ok else 'FINDINGS'}: {what}, {len(result.findings)} finding(s)")
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
    click.echo(f"config:    {cfg.source or '(none: presets only)'}")
    click.echo(f"store:     {cfg.store}")
    click.echo(f"local:     {cfg.local or '(unset: set AM_LOCAL)'}")
    click.echo(f"state dir: {cfg.state_dir}")
    click.echo(f"interval:  {cfg.interval:g}s")
    if not cfg.trees:
        click.echo("trees:     none (set AM_LOCAL to a directory with harness state, or add [[trees]])")
    for t in cfg.trees:
        extra = f"  exclude {', '.join(t.exclude)}" if t.exclude else ""
        if t.sqlite:
            extra += f"  sqlite {', '.join(t.sqlite)}"
        click.echo(f"  {t.name:10} {t.path}{extra}")


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
            click.echo(line)
    if not result.ok:
        sys.exit(1)
