"""Built-in trees for the known harnesses, following the upstream shell design's layout.

Live paths are relative to ``$AM_LOCAL``; each can be overridden by the harness's
own environment variable, as the upstream shell script does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec

SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


class Preset(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    live: str                           # relative to $AM_LOCAL
    env: tuple[str, ...] = ()           # variables that name the live path directly
    home: str = ""                      # a variable naming the directory that holds the live path's last name
    exclude: tuple[str, ...] = ()
    sqlite: tuple[str, ...] = ()


PRESETS: dict[str, Preset] = {p.name: p for p in (
    # Codex 0.171 keeps its threads, goals, queued prompts and memories only in SQLite
    # (docs/harnesses.md); logs_*.sqlite is a log, skills/.system/ the skills it unpacks
    # at every start, thread-writer-locks/ names live processes.
    Preset(name="codex", live="codex-home", env=("CODEX_HOME",), sqlite=("*.sqlite",),
           exclude=("logs_*.sqlite", "logs_*.sqlite-*", "*.db", "*.db-*", "db-backups/", "cache/", ".tmp/",
                    "mcp-oauth-locks/", "thread-writer-locks/", "skills/.system/")),
    # Claude Code 2.1 (docs/harnesses.md) writes files whole through <name>.tmp.<…> and a
    # rename under <name>.lock/ (mkdir locks); sessions/ and ide/ name live processes;
    # debug/, telemetry/, statsig/ and cache/ are logs, spools and downloads;
    # shell-snapshots/ is made again at every start. plugins/ is kept: not re-fetched.
    Preset(name="claude", live="agent-state/claude", env=("CLAUDE_CONFIG_DIR",),
           exclude=("*.tmp.*", "*.lock/", "sessions/*", "ide/*", "debug/*", "telemetry/*", "statsig/*", "cache/*",
                    "shell-snapshots/*")),
    # Gemini CLI 0.61 (docs/harnesses.md) writes files whole through temp names (*.tmp,
    # *.tmp-<pid>, *.tmp.<uuid>) and a rename; projects.json.lock/, the shadow git's
    # locks under history/ and the local Gemma server's pid file name live processes;
    # bin/litert/ and whisper_models/ are downloads it fetches again.
    Preset(name="gemini", live="agent-state/gemini-home/.gemini", env=("GEMINI_LIVE",), home="GEMINI_CLI_HOME",
           exclude=("*.tmp", "*.tmp-*", "*.tmp.*", "projects.json.lock/", "history/*.lock", "tmp/litert-server.pid",
                    "bin/litert/", "whisper_models/")),
    # OpenClaw 2026.9 (docs/harnesses.md) keeps sessions, transcripts and shared state in
    # SQLite (agents/<id>/agent/openclaw-agent.sqlite, state/openclaw.sqlite). Left out as
    # its own `openclaw backup` leaves them out: SQLite leases and reindex copies, the
    # managed roots it reinstalls, agents' temp dirs, plugin-skills/ (a symlink index it
    # rebuilds), node_modules/, logs, pid files, sockets and temp files.
    Preset(name="openclaw", live="oc-home/.openclaw", env=("OPENCLAW_STATE_DIR",), sqlite=("*.sqlite",),
           exclude=("*.sqlite.generation-lock.sqlite", "*.sqlite.generation-writer.sqlite",
                    "*.sqlite.reindex-lock.sqlite", "*.sqlite.memory-reindex-*", "*.sqlite.backup-*",
                    "*.sqlite.tmp-*", "*.lock.sqlite", "tmp/*", "npm/*", "npm-runtime/*", "tools/*", "git/*",
                    "dev/*", "agents/*/agent/tmp/", "agents/*/agent/.tmp/", "plugin-skills/", "node_modules/",
                    "logs/", "*.pid", "*.sock", "*.tmp", "*.tmp.*")),
    # opencode 1.18 (docs/harnesses.md) reads only $XDG_DATA_HOME/opencode: a symlink there
    # points it at this tree. Its sessions, messages and parts are all in opencode.db;
    # log/ is a log nothing reads back, repos/ clones of reference repositories it
    # fetches again (both anchored: a worktree/ checkout may hold its own log/); a git
    # lock in snapshot/ names a process of the lost container.
    Preset(name="opencode", live="opencode-share", env=("OPENCODE_LIVE",), sqlite=("opencode*.db",),
           exclude=("log/*", "repos/*", "snapshot/*.lock")),
    # Hermes 0.19 (docs/harnesses.md): its databases are the ones its own `hermes backup
    # --quick` copies with the backup API; logs/ (its own and each profile's, not a
    # skill's) is a log; the rest left out are caches it rebuilds, dependency trees, its
    # own backups, and files naming live processes.
    Preset(name="hermes", live="hermes", env=("HERMES_LIVE", "HERMES_HOME"),
           sqlite=("state.db", "kanban.db", "projects.db", "response_store.db", "memory_store.db",
                   "verification_evidence.db", "executions.db", "discord_message_recovery.db"),
           exclude=("logs/*", "profiles/*/logs/*", ".update_check", ".skills_prompt_snapshot.json", ".tirith-install-failed",
                    "auth.lock", "gateway.lock", "gateway.pid", "cron.pid", "processes.json", "checkpoints/",
                    "backups/", "node_modules/", ".venv/", "__pycache__/", ".cache/")),
    Preset(name="fx", live="fx-home", env=("FX_LIVE",), exclude=("*.lock", "index.pending")),
    # The Agent Manager's pane scrollback (``$DATA_DIR/state/terminal-history``, rewritten
    # every 5 s through ``<id>.json.<pid>.tmp``): moved to local disk by a symlink.
    Preset(name="terminal", live="terminal-history", env=("TERMINAL_HISTORY_LIVE",), exclude=("*.tmp",)),
)}


def preset_path(preset: Preset, local: str | None, env: Mapping[str, str]) -> str | None:
    """The live path of ``preset``: its override variable, else ``$<home>/<last name of
    live>`` (Gemini's ``$GEMINI_CLI_HOME/.gemini``), else ``$AM_LOCAL/<live>``."""
    for var in preset.env:
        if env.get(var):
            return os.path.abspath(os.path.expanduser(env[var]))
    if preset.home and env.get(preset.home):
        return os.path.join(os.path.abspath(os.path.expanduser(env[preset.home])), os.path.basename(preset.live))
    if local is None:
        return None
    return os.path.join(local, preset.live)


# -- Sessions by identity (design §19, "Sessions by identity"; `journal find --session`) --

#: A session id as Codex, Claude Code, Gemini CLI and OpenClaw write it (lowercase hex).
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: Any other: a name of letters, digits, '.', '_' and '-'.
ANY_ID = r"[A-Za-z0-9][A-Za-z0-9._-]*"


class SessionFiles(msgspec.Struct, frozen=True, kw_only=True):
    """Transcripts named for their session. ``path`` is a path under the tree where
    ``*`` is any part of one name and ``{id}`` (once) the session id, or its first
    ``prefix`` characters; then the first record holding ``id_field`` gives the whole id."""

    path: str
    id: str = UUID                      # the regex the id in the name matches
    prefix: int = 0                     # the name holds only this many leading characters of the id (0: all)
    id_field: tuple[str, ...] = ()      # the keys to the id in a record (needed with ``prefix``)
    cwd_field: tuple[str, ...] = ()     # the keys to the session's working directory in a record
    cwd_file: str = ""                  # or the file holding it, relative to the transcript's directory
    format: str = ""                    # how `journal show` reads it (browse/conversations/); "": not known


class SessionTable(msgspec.Struct, frozen=True, kw_only=True):
    """Sessions as rows of a database the tree snapshots (``Preset.sqlite``): one row
    per session, its id in column ``id``."""

    database: str                       # the database's path under the tree ('*': any part of one name)
    table: str
    id: str
    cwd: str = ""                       # the column holding the session's working directory
    format: str = ""                    # how `journal show` reads its sessions; "": it holds no conversation


class Sessions(msgspec.Struct, frozen=True, kw_only=True):
    """Where a harness's session ids live, and the command that resumes one: ``resume``
    with ``{id}`` replaced, run in the session's working directory when ``in_cwd`` (the
    harness looks its sessions up by the directory it runs in)."""

    files: tuple[SessionFiles, ...] = ()
    tables: tuple[SessionTable, ...] = ()
    resume: tuple[str, ...] = ()        # () when the harness has no known resume command
    in_cwd: bool = False


#: Each harness's sessions, checked against the real CLIs (docs/harnesses.md).
SESSIONS: dict[str, Sessions] = {
    "codex": Sessions(
        files=(SessionFiles(path="sessions/*/*/*/rollout-*-{id}.jsonl", cwd_field=("payload", "cwd"),
                            format="codex"),),
        tables=(SessionTable(database="state_*.sqlite", table="threads", id="id", cwd="cwd"),),
        resume=("codex", "resume", "{id}"), in_cwd=True),
    "claude": Sessions(
        files=(SessionFiles(path="projects/*/{id}.jsonl", cwd_field=("cwd",), format="claude"),),
        resume=("claude", "--resume", "{id}"), in_cwd=True),
    "gemini": Sessions(
        files=(SessionFiles(path="tmp/*/chats/session-*-{id}.jsonl", id="[0-9a-f]{8}", prefix=8,
                            id_field=("sessionId",), cwd_file="../.project_root", format="gemini"),),
        resume=("gemini", "--resume", "{id}"), in_cwd=True),
    "openclaw": Sessions(
        files=(SessionFiles(path="agents/*/sessions/{id}.jsonl", format="pi"),),     # before 2026.9
        tables=(SessionTable(database="agents/*/agent/openclaw-agent.sqlite", table="session_windows",
                             id="session_id", format="openclaw"),),
        resume=("openclaw", "agent", "--session-id", "{id}")),
    "opencode": Sessions(
        tables=(SessionTable(database="opencode*.db", table="session", id="id", cwd="directory",
                             format="opencode"),),
        resume=("opencode", "--session", "{id}"), in_cwd=True),
    "hermes": Sessions(
        tables=(SessionTable(database="state.db", table="sessions", id="id", cwd="cwd", format="hermes"),),
        resume=("hermes", "chat", "--resume", "{id}")),
    "fx": Sessions(files=(SessionFiles(path="sessions/{id}/events.jsonl", id=ANY_ID),)),
}
