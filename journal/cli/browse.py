"""``journal ls``, ``cat``, ``diff`` and ``find``: browsing history without restoring
it; see ``journal/browse/``. Each exits 3 when its answer came (partly) from an older
checkpoint than the one asked for, past damage, as a fallback restore does."""

from __future__ import annotations

import datetime as _dt
import stat
import sys

import click

from .app import EXIT_FALLBACK, MOMENT, CliReporter, common, echo, emit_json, main, open_context
from .render import count, number

AT_HELP = f"The checkpoint to read: {MOMENT}; a time means the newest checkpoint at or before it (default: the newest)."


def _view(config_path, store_url, op: str):
    return config_view(config_path, store_url, op)[1]


def tree_harnesses(cfg) -> dict[str, str]:
    """Each configured tree's harness preset, by tree name (trees without one left out)."""
    return {t.name: t.preset for t in (*cfg.trees, *cfg.dormant) if t.preset}


def config_view(config_path, store_url, op: str):
    from ..browse.view import View
    from ..repository.lineage import open_existing

    cfg, store = open_context(config_path, store_url)
    return cfg, View(open_existing(store, cfg.state_dir, key=cfg.key), op, CliReporter())


def fallback_exit(notes: list[str], op: str, seq: int | None) -> None:
    """Say that the answer is a fallback, and exit 3; nothing when it is not."""
    if notes:
        where = f", checkpoint {seq}" if seq is not None else ""
        echo(f"{op}: answered from a FALLBACK (exit {EXIT_FALLBACK}){where}: {'; '.join(notes)}", err=True)
        sys.exit(EXIT_FALLBACK)


def when(ns: int | None) -> str:
    if not ns:
        return "-"
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


_TYPE_BITS = {"dir": stat.S_IFDIR, "symlink": stat.S_IFLNK, "tree": stat.S_IFDIR}


def _ls_line(item, long: bool) -> str:
    from ..paths import shown

    name = shown(item.name) + ("/" if item.kind in ("dir", "tree") else "")
    if item.target is not None:
        name += f" -> {shown(item.target)}"
    size = number(item.size) if item.kind != "dir" else "-"
    time_or_files = count(item.files, "file") if item.kind == "tree" else when(item.mtime_ns)
    line = f"{item.kind:7} {size:>15}  {time_or_files:19}  {name}"
    if not long:
        return line
    mode = "?" * 10 if item.mode is None else stat.filemode(_TYPE_BITS.get(item.kind, stat.S_IFREG) | item.mode)
    if item.kind == "tree":
        mode = "d" + "-" * 9
    changed = "-" if item.changed is None else f"{'' if item.changed_exact else '<='}{item.changed}"
    return f"{mode} {changed:>8}  {line}"


@main.command()
@common
@click.option("--at", metavar="SEQ|TIME", help=AT_HELP)
@click.option("-l", "--long", "long_", is_flag=True,
              help="Also each entry's mode and the checkpoint that last changed it (looks back up to 100 "
                   "checkpoints; '<=N': unchanged since at least N).")
@click.argument("where", metavar="[TREE[/PATH]]", required=False)
def ls(config_path, store_url, as_json, at, long_, where):
    """List what a checkpoint holds under TREE/PATH, without restoring anything.

    Without TREE, the trees; a directory's entries by name, as `ls` sorts them (kind,
    size, mtime in UTC); a file as itself. Reads the manifest and the index pages of
    that directory only, never a data pack.

    Example:

        journal ls --at 42 --long codex/sessions
    """
    from ..browse.ls import list_path
    from ..browse.where import parse_where
    from ..paths import shown

    target = parse_where(where, "ls")
    view = _view(config_path, store_url, "ls")
    listing = list_path(view, target, at=at, long=long_)
    if as_json:
        emit_json(listing)
    elif listing.seq is None:
        echo("no checkpoint in the store yet")
    else:
        echo(f"{shown(listing.path) or 'trees'} at checkpoint {listing.seq} ({listing.created}):")
        for item in listing.entries:
            echo(_ls_line(item, long_))
    fallback_exit(listing.skipped, "ls", listing.seq)


@main.command()
@common
@click.option("--at", metavar="SEQ|TIME", help=AT_HELP)
@click.argument("where", metavar="TREE/PATH")
def cat(config_path, store_url, as_json, at, where):
    """Write one file's bytes, exactly as checkpointed, to stdout.

    A transcript's complete lines, a file's bytes; a database as a SQLite file (rebuilt
    and checked in a temp directory first, so it needs its size free in $TMPDIR). A
    directory or a symlink is an error saying what it is. Streamed: memory stays
    bounded whatever the size. Reads only the packs holding that file. --json changes
    only how an error is reported.

    Example:

        journal cat --at 42 codex/sessions/2026/02/23/rollout.jsonl > rollout.jsonl
    """
    from ..browse.cat import cat as run_cat
    from ..browse.where import parse_where

    target = parse_where(where, "cat")
    view = _view(config_path, store_url, "cat")
    result = run_cat(view, target, sys.stdout.buffer, at=at)
    fallback_exit(result.fallbacks + result.skipped, "cat", result.seq)


_MARKS = {"added": "A", "removed": "D", "changed": "M"}


def _diff_line(change) -> str:
    from ..paths import shown

    note = ""
    if change.old_kind is not None:
        note = f"  ({change.old_kind} -> {change.kind})"
    elif change.rewritten:
        note = "  (rewritten, not appended to)"
    elif change.lines_added is not None:
        note = f"  (+{count(change.lines_added, 'line')})"
    elif change.pages_changed is not None:
        note = f"  ({number(change.pages_changed)} of {count(change.pages, 'page')} changed)"
    return f"{_MARKS[change.change]} {change.size_change:>+15,}  {shown(change.path)}{note}"


@main.command()
@common
@click.option("--no-lines", is_flag=True,
              help="Do not count the lines added to transcripts or the pages changed in databases: read no data "
                   "pack.")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.argument("where", metavar="[TREE[/PATH]]", required=False)
def diff(config_path, store_url, as_json, no_lines, a, b, where):
    """List the paths added (A), removed (D) and changed (M) from checkpoint A to B.

    A and B each name a checkpoint as --at does (a sequence number, latest~N, or a
    time: the newest checkpoint at or before it; UTC), optionally under TREE/PATH;
    each line gives the size change, and for a
    transcript the complete lines added, for a database the pages changed (a
    database often keeps its size when its rows change). Subtrees the two
    checkpoints share are skipped unread; only the new segments of changed
    transcripts and the page maps of changed databases are read (none with
    --no-lines). --json gives the same as a list of records.

    Example:

        journal diff 40 42 codex/sessions
    """
    from ..browse.diff import diff as run_diff
    from ..browse.where import parse_where

    target = parse_where(where, "diff")
    view = _view(config_path, store_url, "diff")
    result = run_diff(view, a, b, target, lines=not no_lines)
    if as_json:
        emit_json(result.changes)
    else:
        counts = {kind: sum(c.change == kind for c in result.changes) for kind in _MARKS}
        echo(f"checkpoint {result.a} -> {result.b}: " + ", ".join(f"{number(n)} {k}" for k, n in counts.items()))
        for change in result.changes:
            echo(_diff_line(change))
    fallback_exit(result.skipped, "diff", result.b)


@main.command()
@common
@click.option("--tree", metavar="TREE", help="Look in this tree only.")
@click.option("--since", metavar="SEQ|TIME", help=f"Look only at checkpoints from this one on: {MOMENT}; a time "
                                                  "means those made at or after it (a date: from its start).")
@click.option("--session", metavar="ID", help="Instead of PATTERN: the harness sessions whose id begins with ID (at "
                                              "least 8 characters), and the command that resumes each.")
@click.argument("pattern", required=False)
def find(config_path, store_url, as_json, tree, since, session, pattern):
    """For each path whose name matches PATTERN, the checkpoints holding it, newest first.

    PATTERN is a glob ('*.jsonl', 'rollout-*') on each path's last name, at any
    depth; one holding '/' matches the whole TREE/PATH, where '*' and '?' stop at
    '/' and '**' crosses it: 'codex/*' is what lies right under codex,
    'codex/**/*.jsonl' every transcript under it. Each line is one version of the
    path: the checkpoints from the one it changed in to the newest still holding it
    (or a span in which it was absent). Reads every manifest (from --since on) and
    each distinct index page once.

    --session ID finds a harness's session by its id (the whole id, or 8 or more of
    its first characters: a prefix several share lists them all): for each, its
    transcripts and database rows with the checkpoints holding them, its working
    directory, and the command that resumes it there. A database is read only where
    it changed (rebuilt in $TMPDIR, as cat does). No such session exits 1.

    Example:

        journal find 'rollout-*.jsonl' --tree codex --since 2026-03-01

        journal find --session 019c8a4c-ed82-79a1-aa28-7738fc5ab61a
    """
    from ..browse.find import find as run_find
    from ..browse.where import parse_where
    from ..paths import shown

    if (pattern is None) == (session is None):
        raise click.UsageError("give PATTERN or --session ID, not both")
    if tree is not None:
        parse_where(tree, "find")
    if session is not None:
        _find_session(config_path, store_url, as_json, tree, since, session)
        return
    view = _view(config_path, store_url, "find")
    result = run_find(view, pattern, tree=tree, since=since)
    if as_json:
        emit_json(result.found)
    else:
        if not result.found:
            echo(f"no path matches {pattern!r} in {count(result.manifests, 'checkpoint')}")
        for found in result.found:
            echo(shown(found.path))
            for v in found.versions:
                echo(_version_line(v))
    fallback_exit(result.skipped, "find", None)


def _version_line(v, indent: str = "  ") -> str:
    span = f"{v.first}" if v.first == v.last else f"{v.first}-{v.last}"
    what = "absent" if v.kind is None else f"{v.kind:7} {v.size:>15,}  {when(v.mtime_ns)}"
    return f"{indent}{span:>13}  {what}"


def _find_session(config_path, store_url, as_json, tree, since, session) -> None:
    from ..browse.sessions import check_session_id, find_sessions

    check_session_id(session)
    cfg, view = config_view(config_path, store_url, "find")
    harnesses = tree_harnesses(cfg)
    result = find_sessions(view, session, harnesses, since=since, tree=tree)
    if as_json:
        emit_json(result.sessions)
    else:
        if len(result.sessions) > 1:
            echo(f"{len(result.sessions)} sessions begin with {session!r} (give more of the id to name one):")
        for found in result.sessions:
            for line in _session_lines(found):
                echo(line)
    fallback_exit(result.skipped, "find", None)


def resume_line(harness: str, resume: list[str], in_cwd: bool, cwd: str | None) -> str:
    """The command that resumes a session, run in its working directory where the harness needs it."""
    import shlex

    command = shlex.join(resume)
    if not resume:
        return f"no resume command is known for {harness}"
    if in_cwd and cwd is not None:
        return f"cd {shlex.quote(cwd)} && {command}"
    return command + ("  (in the session's working directory)" if in_cwd else "")


def _session_lines(session) -> list[str]:
    """A session: its id and harness, where to resume it, and its places' versions."""
    from ..paths import shown

    span = f"checkpoint {session.first}" if session.first == session.last else \
        f"checkpoints {session.first}-{session.last}"
    lines = [f"{session.harness} session {session.id} (tree {session.tree}, {span})"]
    if session.cwd is not None:
        lines.append(f"  cwd     {shown(session.cwd)}")
    lines.append(f"  resume  {resume_line(session.harness, session.resume, session.in_cwd, session.cwd)}")
    for place in session.places:
        lines.append(f"  {shown(place.path)} ({place.kind.value})")
        lines.extend(_version_line(v, "    ") for v in place.versions)
    return lines
