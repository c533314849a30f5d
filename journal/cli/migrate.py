"""``journal migrate``: import the upstream shell design's legacy layout; see migrate/execute.py."""

from __future__ import annotations

import sys

import click

from .app import CliReporter, common, echo, emit_json, main, open_context
from .output import count, number


@main.command()
@common
@click.option("--legacy-root", required=True, metavar="PATH", type=click.Path(file_okay=False),
              help="The shell design's durable root, e.g. /data/state.")
@click.option("--old-home", metavar="DIR", type=click.Path(file_okay=False),
              help="The harnesses' old HOME (default: <legacy-root>/../home): its .gemini is imported "
                   "and kept; its real .local/share/opencode, .hermes and .fx are imported and renamed "
                   "*.pre-agent-state.")
@click.option("--dry-run", is_flag=True, help="Print the full plan; change nothing.")
def migrate(config_path, store_url, as_json, legacy_root, old_home, dry_run):
    """Import the legacy rsync layout as each harness's first checkpoint.

    A tree is imported only when no checkpoint has it yet: legacy files missing
    locally are copied into the live tree (local files are never replaced), each
    database gets the first legacy copy that recovers and passes quick_check in a
    private temp dir, then one checkpoint publishes everything, every open
    transcript included, and is verified in full. Nothing is ever deleted; a
    second run is a no-op. Exits 1 when anything could not be migrated.

    Example:

        journal migrate --legacy-root /data/state --dry-run
    """
    from ..migrate.execute import migrate as run_migrate

    cfg, store = open_context(config_path, store_url, writes=not dry_run)
    report = run_migrate(cfg, store, legacy_root, old_home=old_home, dry_run=dry_run,
                         reporter=CliReporter("verifying", quiet=as_json))
    if as_json:
        emit_json(report)
    else:
        _render(report)
    if not report.ok:
        sys.exit(1)


def _render(report) -> None:
    plan = report.plan
    head = "plan (dry run: nothing is changed)" if report.dry_run else "migration"
    echo(f"{head}: legacy root {plan.legacy_root}, old home {plan.old_home}, store {plan.store}")
    for r in report.results:
        s = r.step
        line = f"{r.outcome:8} {s.op:16} {s.path}"
        if s.source:
            line += f" <- {s.source}"
        if s.target:
            line += f" -> {s.target}"
        line += f": {s.reason}"
        if r.detail:
            line += f" [{r.detail}]"
        echo(line)
    for o in plan.open_transcripts:
        echo(f"open     transcript       {o.path} (tree {o.tree}, pid {', '.join(map(str, o.pids))})")
    for c in report.captures:
        state = "ok" if c.ok else "NOT CAPTURED"
        echo(f"captured {state:16} {c.path}: {count(c.complete, 'complete byte')}, checkpoint holds "
             f"{number(c.stored)}"
             + (f" ({c.detail})" if c.detail else ""))
    for w in report.warnings:
        echo(f"warning: {w}")
    for p in report.problems:
        echo(f"problem: {p}")
    echo(_summary(report), err=not report.ok)


def _summary(report) -> str:
    if report.noop:
        tail = "" if report.ok else " (see the problems above)"
        return f"nothing to migrate: every legacy tree is already in the store or absent{tail}"
    if report.dry_run:
        return f"dry run: would import {', '.join(report.plan.imports) or 'no tree'}; nothing was changed"
    if report.ok:
        return (f"migration complete: imported {', '.join(report.plan.imports) or 'no tree'}; "
                f"checkpoint {report.seq} verified")
    return "migration INCOMPLETE: the legacy copies are untouched; fix the problems above and run it again"
