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
    exclude: tuple[str, ...] = ()
    sqlite: tuple[str, ...] = ()


PRESETS: dict[str, Preset] = {p.name: p for p in (
    # Codex 0.171 keeps its threads, goals, queued prompts and memories only in SQLite
    # (docs/harnesses.md); logs_*.sqlite is a log, skills/.system/ the skills it unpacks
    # at every start, thread-writer-locks/ names live processes.
    Preset(name="codex", live="codex-home", env=("CODEX_HOME",), sqlite=("*.sqlite",),
           exclude=("logs_*.sqlite", "logs_*.sqlite-*", "*.db", "*.db-*", "db-backups/", "cache/", ".tmp/",
                    "mcp-oauth-locks/", "thread-writer-locks/", "skills/.system/")),
    Preset(name="claude", live="agent-state/claude", env=("CLAUDE_CONFIG_DIR",)),
    Preset(name="gemini", live="agent-state/gemini-home/.gemini", env=("GEMINI_LIVE",)),
    Preset(name="openclaw", live="oc-home/.openclaw", env=("OPENCLAW_STATE_DIR",)),
    Preset(name="opencode", live="opencode-share", env=("OPENCODE_LIVE",), sqlite=("opencode*.db",)),
    Preset(name="hermes", live="hermes", env=("HERMES_LIVE",), sqlite=("state.db",)),
    Preset(name="fx", live="fx-home", env=("FX_LIVE",), exclude=("*.lock", "index.pending")),
    # The Agent Manager's pane scrollback (``$DATA_DIR/state/terminal-history``, rewritten
    # every 5 s through ``<id>.json.<pid>.tmp``): moved to local disk by a symlink.
    Preset(name="terminal", live="terminal-history", env=("TERMINAL_HISTORY_LIVE",), exclude=("*.tmp",)),
)}


def preset_path(preset: Preset, local: str | None, env: Mapping[str, str]) -> str | None:
    """The live path of ``preset``: its override variable, else ``$AM_LOCAL/<live>``."""
    for var in preset.env:
        if env.get(var):
            return os.path.abspath(os.path.expanduser(env[var]))
    if preset.name == "gemini" and env.get("GEMINI_CLI_HOME"):
        return os.path.join(os.path.abspath(os.path.expanduser(env["GEMINI_CLI_HOME"])), ".gemini")
    if local is None:
        return None
    return os.path.join(local, preset.live)
