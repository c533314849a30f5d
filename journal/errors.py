"""The error hierarchy. Only ``cli/app.py`` turns these into exit codes.

Messages read "verb noun: detail" and end with a hint where the operator can act.
An ``OSError`` from a local file is described by ``describe_os_error``: the path, the
reason and a hint that fits its errno; ``naming`` attaches the path to an error of a
call made on a file descriptor (a write, an fsync), which carries none.
"""

from __future__ import annotations

import contextlib
import errno
import os

from .paths import shown


class JournalError(Exception):
    """Base of every error journal raises on purpose."""


class ConfigError(JournalError, ValueError):
    """The configuration (file, environment or flags) is unusable."""


class ExportNotEmpty(ConfigError):
    """``restore --to DIR``: DIR holds something an export must not mix with or delete."""

    def __init__(self, to: str, detail: str):
        self.to = to
        super().__init__(f"restore: --to {to}: {detail}")


class StoreError(JournalError, OSError):
    """A store operation failed for a reason other than a missing or existing key.
    ``backend_said`` keeps what the backend said in full (many lines, for ``--debug``
    and ``--json``) when the message is a summary of it."""

    def __init__(self, message: str, backend_said: str | None = None):
        super().__init__(message)
        self.backend_said = backend_said


class NotAStore(StoreError):
    """A location holds data that is not a journal store."""

    def __init__(self, location: str):
        self.location = location
        super().__init__(
            f"open store: {location} is not empty and is not a journal store; "
            "point JOURNAL_STORE at an empty directory or an existing store"
        )


class ObjectNotFound(JournalError, FileNotFoundError):
    """A key that should exist does not."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"read object: {key} does not exist in the store")


class KeyExists(JournalError, FileExistsError):
    """put_if_absent found the key already present."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"put object: {key} already exists")


class CorruptObject(JournalError, ValueError):
    """Stored bytes fail their format or hash check."""

    def __init__(self, key: str, detail: str):
        self.key = key
        self.detail = detail
        super().__init__(f"verify object: {key} is corrupt: {detail}")


def ids_apart(got: str, want: str, least: int = 12, past: int = 4) -> tuple[str, str]:
    """Two ids a message names side by side ("holds X, expected Y"), each cut to
    ``least`` characters, or to ``past`` characters past the first place they differ,
    whichever is longer, so the two never read the same."""
    differ = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    width = max(least, differ + 1 + past)
    return got[:width], want[:width]


class RecordTooLarge(JournalError):
    """A writer was about to store a record larger than readers accept for its kind."""

    def __init__(self, kind: str, size: int, limit: int):
        self.kind = kind
        self.size = size
        self.limit = limit
        super().__init__(f"store record: a {kind} of {size:,} bytes is over the {limit:,} bytes a {kind} may "
                         "hold, and readers would refuse it; nothing was stored for it")


class ManifestConflict(JournalError):
    """Another writer already committed the sequence this writer wanted: the store moved
    on past this writer's last checkpoint."""

    def __init__(self, seq: int, other: str):
        self.seq = seq
        self.other = other
        super().__init__(
            f"checkpoint: the store moved on: checkpoint {seq} was committed by {other}, which this container "
            "never saw, so this container publishes nothing over it; run `journal restore`: it keeps this "
            "container's unpublished work as a fork (`journal log` lists it) and makes the live trees the "
            "store's newest checkpoint (or use another store prefix for a separate history, or `journal "
            "takeover` to make this container's files the next checkpoint)"
        )


class HistoryWithoutState(JournalError):
    """The store has history but this machine's local state does not know it."""

    def __init__(self, state_path: str, latest_seq: int):
        self.state_path = state_path
        self.latest_seq = latest_seq
        super().__init__(
            f"checkpoint: the store already holds checkpoint {latest_seq} but the local state "
            f"({state_path}) is missing or unreadable; run `journal restore` first "
            "(it keeps newer local files and adopts the store's history)"
        )


class UnsafePath(JournalError, ValueError):
    """A manifest names a path that would escape its tree."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"restore: refusing manifest path {path!r}: {reason}")


class Unstorable(JournalError):
    """A live path the path rule refuses (``local/treepath.py``): checkpoint skips it, loudly."""

    def __init__(self, path: str, reason: str, fix: str = "rename it"):
        self.path = path
        self.reason = reason
        super().__init__(f"checkpoint: skipping {path}: {reason}; {fix} to checkpoint it")


class LockBusy(JournalError):
    """Another checkpoint or restore holds the local lock."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(f"lock state: another journal operation holds {path}; try again when it ends, or "
                         "pass --wait (`journal checkpoint --wait`) to wait for it")


class SupervisorRunning(JournalError):
    """Another supervisor holds this state directory's lifetime lock."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(f"supervise: another supervisor runs on this state directory ({path} is locked); "
                         "stop it first, or give this one its own JOURNAL_STATE_DIR")


class NoStoreNamed(ConfigError):
    """``supervise`` with only the implicit default store: a container's own disk, which
    dies with it."""

    def __init__(self, default: str):
        self.default = default
        super().__init__(f"supervise: no store is named, and the default one ({default}) is on this machine's own "
                         "disk; name a durable store with --store URL, $JOURNAL_STORE or `store` in the config file")


class RestoreIncomplete(JournalError):
    """This restore could not rebuild every file; the restore-complete marker is not
    written (so checkpoints refuse: ``CheckpointAfterIncompleteRestore``)."""

    def __init__(self, lost: list[str], uncreatable: list[str] = ()):
        self.lost = lost
        self.uncreatable = list(uncreatable)
        parts = []
        if lost:
            parts.append(f"{len(lost)} file(s) have no good copy in any manifest: {_shown(lost)}; "
                         "run `journal verify --full` to see which objects are damaged")
        if uncreatable:
            parts.append(f"{len(uncreatable)} path(s) are too long to create here: {_shown(uncreatable)}; "
                         "shorten the tree's directory, or export with `journal restore --to` a shorter DIR")
        super().__init__("restore: " + "; ".join(parts))


def _shown(paths: list[str]) -> str:
    return ", ".join(map(shown, paths[:5])) + (" ..." if len(paths) > 5 else "")


class NoStore(StoreError):
    """The store location is absent or empty and the operation does not create one.
    ``missing_parent``: the store's parent directory, when it does not exist either."""

    def __init__(self, location: str, missing_parent: str | None = None):
        self.location = location
        hint = (f"its parent directory {missing_parent} does not exist either (is the volume mounted?); mount it, "
                "or fix JOURNAL_STORE" if missing_parent else
                "run `journal init` or `journal checkpoint` to create it")
        super().__init__(f"open store: no journal store at {location}; {hint}")


class SnapshotFailed(JournalError):
    """A live SQLite database could not be snapshotted; its previous snapshot stays."""

    def __init__(self, path: str, detail: str):
        self.path = path
        self.detail = detail
        super().__init__(f"snapshot database: {shown(path)}: {detail}; nothing was published for it "
                         "(its previous snapshot, if any, stays authoritative)")


class CheckpointErrors(JournalError):
    """The checkpoint finished every tree it could, but some paths failed."""

    def __init__(self, errors: list[str], seq: int | None):
        self.errors = errors
        self.seq = seq
        done = f"checkpoint {seq} committed the rest" if seq else "nothing else needed committing"
        super().__init__(f"checkpoint: {len(errors)} failure(s) ({done}): " + "; ".join(errors))


class GcBusy(JournalError):
    """Another gc holds the store's gc lease."""

    def __init__(self, holder: str, expires: str):
        self.holder = holder
        self.expires = expires
        super().__init__(f"gc: another gc ({holder}) holds the store's lease until {expires}; "
                         "try again after it ends (a lease left by a crashed gc is taken over once it expires)")


class GcPlanStale(JournalError):
    """The store no longer gives the decisions of the gc plan being executed."""

    def __init__(self, planned: list[int], now: list[int]):
        self.planned = planned
        self.now = now
        super().__init__(f"gc: the store changed since this plan was made (it listed {len(planned)} manifest(s) up "
                         f"to {planned[-1] if planned else 'none'}, the store now holds {len(now)} up to "
                         f"{now[-1] if now else 'none'}); nothing was changed: make a new plan")


class GcBlocked(JournalError):
    """A manifest gc keeps needs an object the store does not hold (or holds damaged):
    gc cannot know what that object would have kept, so it deletes nothing."""

    def __init__(self, seq: int, tree: str, detail: str):
        self.seq = seq
        self.tree = tree
        super().__init__(f"gc: checkpoint {seq} (tree {tree}) needs an object that is missing or damaged ({detail}); "
                         "gc deletes nothing while a checkpoint it keeps is damaged: run `journal verify --full` "
                         "to see every damaged file, then replace the damaged checkpoints (restore an older one "
                         "with `journal restore --at` and checkpoint again)")


class CheckpointAfterIncompleteRestore(JournalError):
    """A checkpoint refused: the last restore on this machine did not finish (it could not
    rebuild everything, or it was stopped); checkpoints wait for it (``RestoreIncomplete``
    is that restore's own error)."""

    def __init__(self, state_path: str):
        self.state_path = state_path
        super().__init__(
            f"checkpoint: the last `journal restore` here was incomplete ({state_path}); run it again "
            "(after fixing what it reported), or accept what is on disk with `journal takeover`"
        )


class StoreVanished(StoreError):
    """The store this machine checkpointed to is absent or empty now."""

    def __init__(self, location: str, store_id: str | None, seq: int | None, missing_parent: str | None = None,
                 unreadable_state: str | None = None):
        self.location = location
        hint = (f"its parent directory {missing_parent} does not exist: mount the volume there, or fix "
                "JOURNAL_STORE if it names the wrong place" if missing_parent else
                "is the volume mounted? To start a new, empty store there on purpose, run `journal init`, "
                "then `journal takeover`")
        known = (f"this machine's local state {unreadable_state} exists but cannot be read, so it may have "
                 "checkpointed to a store there" if unreadable_state is not None else
                 f"this machine has checkpointed up to {seq} to store {store_id}")
        super().__init__(f"open store: no journal store at {location}, but {known}; {hint}")


class DamagedConfig(StoreError):
    """The store's ``config`` object is missing or fails its checks while the store holds data."""

    def __init__(self, location: str, problem: str):
        self.location = location
        self.problem = problem
        super().__init__(f"open store: {location}/config {problem}; the store's config object is damaged: "
                         "copy it back from a backup of the store (nothing was changed)")


class NoKey(ConfigError):
    """An encrypted store, and no key source is configured (design §22)."""

    def __init__(self, location: str):
        self.location = location
        super().__init__(f"open store: {location} is encrypted and no key is set; set JOURNAL_KEY_FILE to its key "
                         "file (or `key_file` in the config file), or JOURNAL_PASSPHRASE to its passphrase")


class NoCloudCredentials(ConfigError):
    """A cloud store and no credentials for it: none configured, and no metadata service
    gave any (exit 2, as a missing key). ``backend_said``: the client's own words."""

    def __init__(self, message: str, backend_said: str | None = None):
        super().__init__(message)
        self.backend_said = backend_said


class WrongKey(JournalError):
    """The configured key unlocks none of an encrypted store's key objects."""

    def __init__(self, source: str, location: str, keys: int, damaged: int = 0):
        self.source = source
        self.location = location
        of = f" ({damaged} of them damaged: `journal verify` names them)" if damaged else ""
        super().__init__(f"open store: {source} opens none of the {keys} key(s) of {location}{of}; use the key file "
                         "or passphrase the store was created or `journal key add`ed with (nothing was changed)")


class KeyUnusable(ConfigError):
    """A key source that cannot give a key: a key file missing, unreadable or too short, an
    empty passphrase, or a new key given twice."""

    def __init__(self, source: str, problem: str, fix: str):
        self.source = source
        super().__init__(f"read key: {source} {problem}; {fix}")


class KeyRefused(ConfigError):
    """``journal key remove`` (or ``rotate``) asked for what would lock the store or
    named no key of it: nothing was changed."""

    def __init__(self, op: str, detail: str):
        super().__init__(f"{op}: {detail}; nothing was changed")


class CryptoUnavailable(JournalError):
    """An encrypted store, and the ``cryptography`` package is not installed."""

    def __init__(self, what: str):
        super().__init__(f"{what} needs the `cryptography` package, which is not installed: "
                         "pip install 'journal[crypto]'")


class NotEncrypted(ConfigError):
    """A key is configured, but the store's config says it is not encrypted: journal
    never writes in the clear while a key is set (the config may have been replaced)."""

    def __init__(self, location: str, source: str):
        self.location = location
        super().__init__(f"open store: {location} is not encrypted, yet {source} is set: journal never writes a "
                         "store in the clear while a key is set (someone who can write the store may have replaced "
                         "its config with a plain one); nothing was written: point JOURNAL_STORE at the encrypted "
                         "store this key opens, or start one at a new location with `journal init --encrypt`")


class Downgraded(JournalError):
    """A store whose config says it is plain, which this machine's local state or the
    store's own key objects show was encrypted: its config may have been replaced so
    that journal writes in the clear (design §22)."""

    def __init__(self, location: str, evidence: str):
        self.location = location
        super().__init__(f"open store: {location}'s config says it is not encrypted, but {evidence}: someone who can "
                         "write the store may have replaced its config so that journal writes in the clear; nothing "
                         "was written: copy the store's encrypted config back from a backup (design §22), and check "
                         "that JOURNAL_STORE names the right store")


class ForeignStore(JournalError):
    """The local state follows one store; the store configured now is another one."""

    def __init__(self, op: str, location: str, store_id: str, state_path: str, followed: str, seq: int):
        self.store_id = store_id
        self.followed = followed
        super().__init__(
            f"{op}: {location} is store {store_id}, but this machine's local state ({state_path}) follows "
            f"store {followed} (up to checkpoint {seq}); a {op} here would mix the two histories. Point "
            f"JOURNAL_STORE back at store {followed}, export this one with `journal restore --to DIR`, make "
            f"this container continue store {store_id} with `journal takeover` (local files are kept), or "
            f"remove {state_path} on purpose; nothing was changed")


class HistoryLost(JournalError):
    """The store no longer holds the checkpoint the local state was built on, nor a later one."""

    def __init__(self, op: str, location: str, state_path: str, seq: int, key: str, newest: int | None):
        self.seq = seq
        self.newest = newest
        held = f"its newest is checkpoint {newest}" if newest else "it holds no checkpoint at all"
        then = f"continue from checkpoint {newest}" if newest else "start its history again"
        super().__init__(
            f"{op}: store {location} no longer holds checkpoint {seq} ({key}), the last one this machine's "
            f"local state ({state_path}) knows, nor any later one ({held}): its manifests were deleted or the "
            f"store was rolled back. Copy the missing manifests back from a backup of the store, or run "
            f"`journal takeover` to {then} with this container's files (`journal restore --to DIR` exports "
            f"what the store still holds); nothing was changed")


class LocalWriteError(JournalError):
    """journal could not write one of its own local files (a spooled pack, a cached
    copy): never to be taken for a live path that cannot be read."""

    def __init__(self, what: str, err: OSError, path: str):
        self.path = path
        self.errno = err.errno
        super().__init__(f"{what}: {describe_os_error(err, err.filename or path)}")


class StateDirUnusable(JournalError):
    """The local state directory cannot be created or locked."""

    def __init__(self, state_dir: str, err: OSError):
        self.state_dir = state_dir
        where = err.filename or state_dir
        super().__init__(f"lock state: cannot use {state_dir} as the state directory ({where}: {err.strerror}); "
                         f"{os_error_hint(err, where)}, or set JOURNAL_STATE_DIR (or AM_LOCAL) to a writable "
                         "directory")


def mount_point(path: str) -> str:
    """The mount point of the mount holding ``path`` (or its nearest existing parent),
    from ``/proc/self/mountinfo`` (``localfs.find_mount``): a read-only bind mount of a
    directory is named, not the filesystem it is a directory of. Without mountinfo, the
    topmost directory above it on the same device."""
    from .localfs import find_mount   # here: only a full or read-only disk's hint needs it

    found = find_mount(path)
    if found is not None:
        return found.point
    path = os.path.abspath(path)
    while True:
        try:
            dev = os.stat(path).st_dev
            break
        except OSError:
            parent = os.path.dirname(path)
            if parent == path:
                return path
            path = parent
    while path != os.path.dirname(path):
        parent = os.path.dirname(path)
        try:
            if os.stat(parent).st_dev != dev:
                return path
        except OSError:
            return path
        path = parent
    return path


#: Hints that need no path, by errno.
_HINTS = {
    errno.EIO: "the device reported an I/O error; check the disk and the kernel log (dmesg)",
    errno.ENAMETOOLONG: "the path is longer than the system allows (4096 bytes, or 255 for one name); shorten it",
    errno.ELOOP: "too many levels of symbolic links on that path; fix the links",
    errno.ENOTDIR: "a file stands where a directory belongs; move it aside",
    errno.EISDIR: "a directory stands where a file belongs; move it aside",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n)",
    errno.ENFILE: "too many open files; raise the limit (ulimit -n)",
    errno.ENOENT: "it does not exist; create it or fix the path",
    errno.EEXIST: "it already exists; move it aside",
    errno.EBUSY: "it is in use; try again when the other process lets go of it",
    errno.ETXTBSY: "it is in use; try again when the other process lets go of it",
}


def os_error_hint(err: OSError, path: str | None = None) -> str:
    """What the operator can do about ``err`` at ``path`` (default: its filename)."""
    where = path or err.filename
    code = err.errno
    if code not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        if code in (errno.EACCES, errno.EPERM):
            what = f"{shown(where)} and of the directories above it" if where else "the file and its directories"
            return f"check the permissions of {what} (journal runs as uid {os.getuid()})"
        return _HINTS.get(code, "check that path")
    fs = f"the filesystem mounted at {mount_point(where)}" if where else "the filesystem journal writes to"
    if code == errno.ENOSPC:
        return f"free space on {fs}"
    if code == errno.EDQUOT:
        return f"free space on {fs} or raise your disk quota there"
    return f"{fs} is read-only; remount it read-write"


def describe_os_error(err: OSError, path: str | None = None) -> str:
    """One line for a local file's error: "<path>: <reason>; <hint>" (the path is
    ``path``, else the error's own filename, else left out)."""
    where = path or err.filename
    reason = err.strerror or str(err)
    return f"{shown(where)}: {reason}; {os_error_hint(err, where)}" if where else f"{reason}; {os_error_hint(err)}"


def describe_error(err: Exception) -> str:
    """One line for an error an operation ends with: journal's own message, an OS error
    with its file and hint, else the exception's type and text."""
    if isinstance(err, JournalError):
        return str(err)
    if isinstance(err, OSError) and err.strerror:
        return describe_os_error(err)
    return f"{type(err).__name__}: {err}"


@contextlib.contextmanager
def naming(path: str):
    """Attach ``path`` to an ``OSError`` raised inside that names no file (a write or
    an fsync on a descriptor), so that its message can say where it happened."""
    try:
        yield
    except OSError as err:
        if err.filename is None and not isinstance(err, JournalError):
            err.filename = path
        raise


class NoReadableCheckpoint(JournalError):
    """Every checkpoint a restore could come from is unreadable: nothing can be restored."""

    def __init__(self, op: str, count: int, newest_key: str, cause: str):
        done = "nothing was restored" if op == "restore" else "nothing to show"
        super().__init__(
            f"{op}: none of the {count} checkpoint(s) in the store can be read (the newest, {newest_key}: "
            f"{cause}); {done}. Run `journal verify` to see the damage, and restore the store's "
            f"manifests from a backup")


class BadBrowsePath(ConfigError):
    """``ls``, ``cat``, ``diff``, ``find``: a TREE/PATH that is malformed, names no tree or
    path of the checkpoint, or names what the command cannot show (``cat`` of a directory)."""

    def __init__(self, op: str, shown: str, detail: str):
        self.shown = shown
        self.detail = detail
        super().__init__(f"{op}: {shown}: {detail}")


class BadSessionId(ConfigError):
    """``find --session``: an id no harness writes, or too short to name one session."""

    def __init__(self, shown: str, detail: str):
        self.shown = shown
        super().__init__(f"find: session id {shown}: {detail}; give at least 8 leading characters of the id as the "
                         "harness wrote it (letters, digits, '.', '_' and '-')")


class NoSuchSession(JournalError):
    """``find --session``: no checkpoint looked at holds a session whose id begins so."""

    def __init__(self, session: str, detail: str):
        self.session = session
        super().__init__(f"find: no session id begins with {session!r} {detail}; check the id the harness printed "
                         "(`journal find '*.jsonl'` lists the transcripts)")


class NoGoodCopy(JournalError):
    """A path of a checkpoint whose every copy (its own and every older one) is damaged
    or missing; ``written`` bytes of it already went out when ``cat`` found that out."""

    def __init__(self, op: str, shown: str, detail: str, written: int = 0):
        self.shown = shown
        self.written = written
        lost = (f"; the output is INCOMPLETE: {written:,} bytes were written before the damage was found, and no "
                "older copy begins with them" if written else "")
        super().__init__(f"{op}: {shown}: no good copy ({detail}){lost}; run `journal verify --full` to see which "
                         "objects are damaged")


class InputTooLarge(ConfigError):
    """An input over the configured limit: refused whole, nothing stored."""

    def __init__(self, size: int | None, limit: int, where: str = "append input"):
        self.size = size
        self.limit = limit
        what = f"is {size:,} bytes, over" if size is not None else "is over"
        super().__init__(f"{where}: the text {what} the input limit of {limit:,} bytes; "
                         "nothing was stored (raise `input_limit` in the config or $JOURNAL_INPUT_LIMIT, "
                         "up to 16 MiB, or send a shorter text)")


class InputNotFound(JournalError):
    """An input id names no input in the store."""

    def __init__(self, input_id: str, key: str):
        self.input_id = input_id
        self.key = key
        super().__init__(f"input: {input_id} is not in the store ({key} does not exist); "
                         "`journal input list` shows the stored inputs")


class ClientIdReused(ConfigError):
    """An append whose client id an input with another text already carries: a retry
    sends the same text, so this is another prompt, and nothing is stored for it."""

    def __init__(self, client_id: str, first: str):
        self.client_id = client_id
        self.first = first
        super().__init__(f"append input: client id {client_id!r} was used already, by input {first}, with another "
                         "text; nothing was stored: give this prompt a new client id (`journal input show "
                         f"{first}` shows the first)")


class InputBusy(JournalError):
    """Other appenders took every sequence number this append tried."""

    def __init__(self, session: str, tries: int):
        super().__init__(f"append input: {tries} sequence numbers of session {session} were taken by other "
                         "appenders while this one tried them; nothing was stored; try again")
