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

# The state directory's layout (docs/design.md §10): every name journal makes in it,
# defined here once. ``tests/test_paths.py`` checks that the code makes no other and
# that the design lists each one.
STATE_FILE = "state.msgpack"        # the local state file (local/state.py), replaced atomically
STATE_BASE_DIR = "state-base"       # the local state's bases, <token>, each written once (local/state.py)
LOCK_FILE = "lock"                  # flock: one checkpoint or restore at a time
SUPERVISE_LOCK = "supervise.lock"   # flock a supervisor holds for its lifetime (supervise/run.py)
STATUS_FILE = "status.json"         # the supervisor's status (supervise/status.py)
QUIET_FILE = "quiet.marshal"        # the quiet snapshot (local/quiet.py)
TMP_DIR = "tmp"                     # temp files of atomic writes; private copies of live databases
SPOOL_DIR = "spool"                 # packs being built (repository/pack.py)
COPY_SPOOL_DIR = "copy-spool"       # packs being copied to another store (copy/packs.py, copy/reseal.py)
STAGING_DIR = "sqlite-staging"      # online-backup copies being checked and cut (sqlite/snapshot.py)
BASE_DIR = "sqlite-base"            # full maps' staging copies, kept (sqlite/base_copy.py)
MAPS_DIR = "maps"                   # whole page maps and how each is stored (repository/blob_cache.py)
PAGES_DIR = "pages"                 # whole index pages (checkpoint/page_delta.py)
CHUNKS_DIR = "chunks"               # whole chunks of rewritten files (checkpoint/file_delta.py)
RECHECK_DIR = "recheck"             # packs found already stored, checked again after the commit
TREE_TMP_DIR = "tree-tmp"           # records of journal's temp directories in live trees (local/tree_tmp.py)
INVALID_DIR = "invalid"             # invalid local databases moved aside by restore and migrate
INPUT_SOCKET = "input.sock"         # the input socket a supervisor serves, by default (supervise/inputs.py)
ACTIVITY_DIR = "activity"           # what the last checkpoint, run, restore and error were (local/activity.py)
ACTIVITY_OK = "ok"                  # in it: an empty file whose mtime is the last successful checkpoint run
STATE_NAMES = (STATE_FILE, STATE_BASE_DIR, LOCK_FILE, SUPERVISE_LOCK, STATUS_FILE, QUIET_FILE, TMP_DIR, SPOOL_DIR,
               STAGING_DIR, BASE_DIR, MAPS_DIR, PAGES_DIR, CHUNKS_DIR, RECHECK_DIR, TREE_TMP_DIR, INVALID_DIR, INPUT_SOCKET,
               ACTIVITY_DIR, COPY_SPOOL_DIR)

# The state directory is private to its owner (docs/design.md §10): every directory
# journal makes in it has mode 0700 and every file 0600, passed to the call that makes
# it, so the umask (which only takes bits away) changes nothing (``local/private.py``).
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


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
#: Variables holding a secret (an encrypted store's passphrase, design §22): the
#: configuration depends only on whether each is set, so only that goes into the
#: digest the quiet snapshot keeps, never a hash of the secret.
SECRET_VARS = frozenset({"JOURNAL_PASSPHRASE", "JOURNAL_NEW_PASSPHRASE", "JOURNAL_TO_PASSPHRASE"})
#: The variables that open an encrypted store (design §22; a copy's target, §23):
#: `journal supervise` keeps them from CMD unless --pass-key-env (§15).
KEY_VARS = frozenset({"JOURNAL_KEY_FILE", "JOURNAL_TO_KEY_FILE", *SECRET_VARS})


def inputs_key(explicit: str | None, env: Mapping[str, str], store: str | None, local: str | None) -> str:
    """A digest of everything the effective configuration is resolved from, except the
    existence of preset directories: the flags, the whole environment, the working
    directory and the config file's identity (of a secret variable, only whether it is
    set). Equal keys resolve to equal configs."""
    source, _ = config_source(explicit, env)
    try:
        st = os.stat(source)
        source_sig = (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)
    except OSError:
        source_sig = None
    named = sorted((k, bool(v) if k in SECRET_VARS else v) for k, v in env.items() if k not in SHELL_NOISE)
    material = repr((explicit, store, local, os.getcwd(), source, source_sig, named))
    return blake2b(material.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def shown(path: str) -> str:
    """``path`` printable on one line: each byte that is not UTF-8 as ``\\xNN``, each
    control character as a Python escape (a name may hold a newline)."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
