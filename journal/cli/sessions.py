"""``journal sessions`` and ``journal show``: the harnesses' sessions a checkpoint
holds, and one of them as a conversation (``journal/browse/conversations/``). Each
exits 3 when a transcript or database could not be read (damage passed over), as
the other browse commands do."""

from __future__ import annotations

import click

from .app import common, echo, emit_json, main
from .browse import AT_HELP, config_view, fallback_exit, resume_line, tree_harnesses, when
from .render import count, number

#: How much of a tool call, a tool result, the model's reasoning and text the harness
#: put in (context, notes) ``show`` prints: lines, and characters in all. A prompt and a
#: reply are printed whole.
SHORT = {"tool_call": (3, 300), "tool_result": (5, 500), "thinking": (3, 300), "context": (1, 120), "info": (1, 200)}
#: The width of the first prompt in the listing.
PROMPT_WIDTH = 60


@main.command()
@common
@click.option("--harness", metavar="NAME", help="Only this harness's sessions (codex, claude, gemini, opencode, "
                                                "openclaw, hermes).")
@click.option("--at", metavar="SEQ|TIME", help=AT_HELP)
def sessions(config_path, store_url, as_json, harness, at):
    """List the harnesses' sessions a checkpoint holds, newest activity first.

    One line per session: its harness and id, its turns (prompts), the bytes of its
    records, its last activity (UTC), the checkpoint that last changed it ('<=N':
    unchanged since at least N, as far back as the walk looked) and its first prompt.
    Reads every transcript of the checkpoint whole, and each database once (rebuilt
    in $TMPDIR, as cat does); a database's older versions only to find where each of
    its sessions last changed. `journal show ID` prints one.

    Example:

        journal sessions --harness claude --at 2h
    """
    from ..browse.conversations.catalog import list_sessions, readable_rules

    readable_rules({}, harness)    # an unknown harness is bad input: said before the store is opened
    cfg, view = config_view(config_path, store_url, "sessions")
    listing = list_sessions(view, tree_harnesses(cfg), at=at, harness=harness)
    if as_json:
        emit_json(listing)
    else:
        for line in _listing_lines(listing, harness):
            echo(line)
    fallback_exit(listing.skipped, "sessions", listing.seq)


def _listing_lines(listing, harness: str | None) -> list[str]:
    whose = f"{harness} " if harness else ""
    head = (f"checkpoint {listing.seq} ({listing.created}): {count(len(listing.sessions), whose + 'session')}")
    if not listing.sessions:
        return [head]
    width = max(len(s.id) for s in listing.sessions)
    lines = [head, f"{'HARNESS':9} {'SESSION':{width}} {'TURNS':>5} {'BYTES':>13}  {'LAST ACTIVITY':19} "
                   f"{'CHANGED':>8}  FIRST PROMPT"]
    for s in listing.sessions:
        changed = "-" if s.changed is None else f"{'' if s.changed_exact else '<='}{s.changed}"
        prompt = _cut(s.prompt or "-", PROMPT_WIDTH) + _unreadable(s)
        lines.append(f"{s.harness:9} {s.id:{width}} {s.turns:>5} {number(s.bytes):>13}  {when(s.last_ns):19} "
                     f"{changed:>8}  {prompt}")
    return lines


def _unreadable(session) -> str:
    if not session.unreadable:
        return ""
    return f"  [{_unreadable_count(session)} unreadable]"


def _unreadable_count(session) -> str:
    """``3 lines`` of a transcript, ``3 rows`` of a database."""
    return count(session.unreadable, "line" if session.kind.value == "transcript" else "row")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


@main.command()
@common
@click.option("--at", metavar="SEQ|TIME", help=AT_HELP)
@click.argument("session", metavar="SESSION")
def show(config_path, store_url, as_json, at, session):
    """Print one session as a conversation, as a checkpoint holds it.

    SESSION is the session's id (or 8 or more of its first characters, naming one
    session), as `journal sessions` lists it. Prompts and replies are printed whole;
    tool calls, tool results, the model's reasoning and the text the harness put in
    are shortened. Records that cannot be read are skipped and counted. --json gives
    the session and its turns, each item in full. No such session exits 1.

    Example:

        journal show 01a25175-9bbc --at latest~3
    """
    from ..browse.conversations.catalog import show_session
    from ..browse.sessions import check_session_id

    check_session_id(session, "show")
    cfg, view = config_view(config_path, store_url, "show")
    shown = show_session(view, session, tree_harnesses(cfg), at=at)
    if as_json:
        emit_json(shown)
    else:
        for line in _show_lines(shown):
            echo(line)
    fallback_exit(shown.skipped, "show", shown.seq)


def _show_lines(shown) -> list[str]:
    from ..paths import shown as one_line

    s = shown.session
    changed = "-" if s.changed is None else f"{'' if s.changed_exact else 'no later than '}{s.changed}"
    lines = [f"{s.harness} session {s.id} (tree {s.tree}, checkpoint {shown.seq}, {shown.created})",
             f"  from    {one_line(s.path)} (last changed in checkpoint {changed})"]
    if s.cwd is not None:
        lines.append(f"  cwd     {one_line(s.cwd)}")
    lines.append(f"  resume  {resume_line(s.harness, shown.resume, shown.in_cwd, s.cwd)}")
    lines.append(f"  {count(s.turns, 'turn')}, {count(s.bytes, 'byte')}, last activity {when(s.last_ns)}")
    for turn in shown.turns:
        first = next((i.time_ns for i in turn.items if i.time_ns), None)
        label = f"turn {turn.number}" if turn.number else "before the first prompt"
        lines += ["", f"── {label} · {when(first)}"]
        for item in turn.items:
            lines.extend(_item_lines(item))
    if s.unreadable:
        lines += ["", f"({_unreadable_count(s)} unreadable, skipped)"]
    return lines


def _item_lines(item) -> list[str]:
    role = item.role.value
    label = role.replace("_", " ") + (f" {item.tool}" if item.tool else "") + (" (failed)" if item.error else "")
    text = item.text.expandtabs(4).splitlines() or [""]
    if role in SHORT:
        text = _shortened(text, *SHORT[role])
    return [f"{label}:", *(f"  {line}" for line in text)]


def _shortened(lines: list[str], most: int, chars: int) -> list[str]:
    """At most ``most`` lines and ``chars`` characters of ``lines``, saying what was left out."""
    kept, used = [], 0
    for line in lines[:most]:
        if used + len(line) > chars:
            kept.append(line[:max(0, chars - used)] + "…")
            break
        kept.append(line)
        used += len(line)
    left = len(lines) - len(kept)
    if left > 0:
        kept.append(f"… ({count(left, 'more line')})")
    return kept
