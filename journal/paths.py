"""Where journal's own files are, decided from flags and the environment.

Free of heavy imports, like ``signatures.py``: ``cli/launch.py`` resolves these before it
decides whether the rest of journal must be imported at all.
"""

from __future__ import annotations

import os

try:
    from _blake2 import blake2b  # what hashlib wraps; importing hashlib costs ~4 ms more
except ImportError:  # pragma: no cover - other interpreters
    from hashlib import blake2b

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

STATE_FILE = "state.msgpack"    # in the state directory: local/state.py
LOCK_FILE = "lock"              # ... the flock of one checkpoint or restore at a time
SUPERVISE_LOCK = "supervise.lock"  # ... the flock a supervisor holds for its lifetime
RECHECK_DIR = "recheck"         # ... packs found already stored, checked again after the commit


def abs_path(path: str | None) -> str | None:
    return os.path.abspath(os.path.expanduser(path)) if path else None


def config_source(explicit: str | None, env: Mapping[str, str]) -> tuple[str, bool]:
    """(path, named): the config file to read; ``named`` when --config or $JOURNAL_CONFIG
    chose it (it must exist), else the default path (read only if it exists)."""
    named = explicit or env.get("JOURNAL_CONFIG")
    if named:
        return named, True
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "journal", "config.toml"), False


def state_dir(env: Mapping[str, str], file_value: str | None, local: str | None) -> str:
    """$JOURNAL_STATE_DIR, else the config file's ``state_dir``, else ``<local>/.journal``,
    else ``~/.local/state/journal``."""
    return abs_path(env.get("JOURNAL_STATE_DIR") or file_value) or (
        os.path.join(local, ".journal") if local else os.path.join(os.path.expanduser("~"), ".local", "state", "journal"))


#: Variables a shell changes from one command to the next; journal reads none of them.
SHELL_NOISE = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})


def inputs_key(explicit: str | None, env: Mapping[str, str], store: str | None, local: str | None) -> str:
    """A digest of everything the effective configuration is resolved from, except the
    existence of preset directories: the flags, the whole environment, the working
    directory and the config file's identity. Equal keys resolve to equal configs."""
    source, _ = config_source(explicit, env)
    try:
        st = os.stat(source)
        source_sig = (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)
    except OSError:
        source_sig = None
    named = sorted(item for item in env.items() if item[0] not in SHELL_NOISE)
    material = repr((explicit, store, local, os.getcwd(), source, source_sig, named))
    return blake2b(material.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
