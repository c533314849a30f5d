"""``journal gc`` and ``journal forget``: which checkpoints the store keeps, and the
deletion of what nothing needs (``gc/``)."""

from __future__ import annotations

import click

from .app import CliReporter, common, echo, emit_json, main, open_context
from .options import GcOptions, gathered

_EVERY = "(seconds, or 30m, 24h, 7d)"


@main.command("gc")
@common
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--keep-last", type=click.IntRange(min=0), help="Keep the newest N checkpoints.")
@click.option("--keep-within", metavar="DURATION", help=f"Keep checkpoints newer than this {_EVERY}.")
@click.option("--keep-hourly", type=click.IntRange(min=0),
              help="Keep the newest checkpoint of each of the last N hours.")
@click.option("--keep-daily", type=click.IntRange(min=0),
              help="Keep the newest checkpoint of each of the last N days.")
@click.option("--keep-weekly", type=click.IntRange(min=0),
              help="Keep the newest checkpoint of each of the last N ISO weeks.")
@click.option("--keep-monthly", type=click.IntRange(min=0),
              help="Keep the newest checkpoint of each of the last N months.")
@click.option("--keep-yearly", type=click.IntRange(min=0),
              help="Keep the newest checkpoint of each of the last N years.")
@click.option("--grace", default="24h", show_default=True, metavar="DURATION",
              help=f"Delete only what was tombstoned at least this long ago {_EVERY}.")
@click.option("--yes", is_flag=True,
              help="With --grace 0: delete in this run what it tombstones too (both phases in one run).")
@click.option("--explain", is_flag=True,
              help="Say of every checkpoint which rules keep it, or why it expires.")
@click.option("--keep-inputs-within", metavar="DURATION",
              help="Expire delivered inputs submitted longer ago than this (seconds, or 30m, 24h, 7d; default: keep "
                   "every input).")
@click.option("--include-undelivered", is_flag=True,
              help="With --keep-inputs-within: expire undelivered inputs too.")
@gathered(GcOptions)
def gc_command(config_path, store_url, as_json, opts: GcOptions):
    """Expire old checkpoints and delete what nothing needs, in two phases.

    Mark: unkept checkpoints and unreachable packs get a tombstone. Sweep: what a
    tombstone older than --grace names is deleted, unless a checkpoint present now
    needs it. A run sweeps only tombstones that were there when it started, so what
    it marks is deleted by a later run (the next one, with --grace 0); it says so.
    `--grace 0 --yes` sweeps this run's tombstones too, after it deletes the expired
    checkpoints (orphan packs still wait for a newer checkpoint). The newest
    checkpoint of every tree is always kept, and a checkpoint `journal forget` named
    never is. Periods are UTC; --keep-weekly counts ISO weeks. With no --keep-*
    option gc refuses: it never guesses what to keep. Stored inputs expire only with
    --keep-inputs-within (delivered ones; every one with --include-undelivered), by
    the same two phases; each session's newest input always stays;
    --keep-inputs-within alone keeps every checkpoint.

    Example:

        journal gc --keep-daily 7 --keep-weekly 4 --keep-last 20 --dry-run --explain
    """
    from ..gc.retention import check_policy
    from ..gc.run import check_sweep, gc as run_gc
    from ..repository.lineage import open_existing

    policy, inputs = opts.policy(), opts.input_policy()
    check_policy(policy, inputs_expire=not inputs.is_empty())   # before the store is opened
    check_sweep(opts.grace_seconds(), opts.yes)
    cfg, store = open_context(config_path, store_url, writes=not opts.dry_run)
    plan, result = run_gc(open_existing(store, cfg.state_dir, key=cfg.key), policy, opts.grace_seconds(),
                          dry_run=opts.dry_run, reporter=CliReporter("deleting", quiet=as_json), inputs=inputs,
                          sweep_marked=opts.yes, explain=opts.explain)
    if as_json:
        emit_json({"dry_run": opts.dry_run, "plan": plan, "result": result})
        return
    from .render import gc_lines

    for line in gc_lines(plan, result, opts.dry_run, opts.grace_shown()):
        echo(line)


@main.command()
@common
@click.argument("seqs", metavar="SEQ...", nargs=-1, required=True, type=click.IntRange(min=1))
@click.option("--dry-run", is_flag=True, help="Say what would be forgotten; change nothing.")
def forget(config_path, store_url, as_json, seqs, dry_run):
    """Expire the checkpoints SEQ... for good; a later gc deletes them.

    Tombstones each as forgotten, with every pack no other checkpoint needs, as gc's
    mark does, and deletes nothing: a `journal gc` past its --grace deletes them (or
    `journal gc --grace 0 --yes` at once). No --keep-* rule keeps a forgotten
    checkpoint again, and the rules count without it. Refuses, changing nothing, a
    checkpoint the store does not hold or cannot read, and the newest checkpoint of a
    tree. Forgetting a fork's parent leaves the fork to gc's other rule for forks
    (kept while newer than the oldest checkpoint kept); it says so.

    Example:

        journal forget 12 13 --dry-run
    """
    from ..gc.forget import forget as run_forget
    from ..repository.lineage import open_existing

    cfg, store = open_context(config_path, store_url, writes=not dry_run)
    done = run_forget(open_existing(store, cfg.state_dir, key=cfg.key), seqs, dry_run=dry_run,
                      reporter=CliReporter("forgetting", quiet=as_json))
    if as_json:
        emit_json(done)
        return
    from .render import forget_lines

    for line in forget_lines(done):
        echo(line)
