"""The quiet snapshot: proving cheaply that nothing changed since the last clean checkpoint.

Most checkpoints are idle. A full idle checkpoint decodes the local state and walks
every tree; this module lets it stop much earlier. After a checkpoint in which every
path was read cleanly (no warning, no error, nothing pending), the checkpoint saves
``<state_dir>/quiet.marshal``, which lists, for every directory the walk visited:

* the directory's listing, names in ``readdir`` order;
* for each name, what the next walk would compare: the stored signature of an
  included file, link or directory (``signatures.py``), the live signature of a
  database, or the file type of an entry the tree excludes.

A later checkpoint first lists those directories and ``lstat``s those names again.
When every listing and every value is equal, the full walk would see the same paths
with the same signatures and nothing gone: the tree is unchanged and the checkpoint is
idle. Any difference, error or doubt means "not proven", and the full checkpoint runs.
A listing is compared as a whole, so a name created in the same clock tick as the
last walk is still seen (a directory's mtime would not show it).

The snapshot is valid only together with the state file it was written after (its
inode, mtime and size are recorded) and with the same configuration (``config_key``,
and ``inputs`` for the console entry point, which answers an idle ``journal
checkpoint`` without importing the rest of journal). Dormant preset paths must still
be absent. This module imports nothing heavy; ``marshal`` keeps the file fast to read.
The rows are saved in two parts, which the console entry point checks in two
processes on a large tree (``_check_parts``; design §10).
"""

from __future__ import annotations

import marshal
import os
import stat as stat_mod
import sys

from ..paths import PRIVATE_DIR, PRIVATE_FILE, QUIET_FILE, TMP_DIR
from ..signatures import Signature, clamp_mtime, file_stamp, live_signature

FORMAT = 7
_TAG = (FORMAT, sys.version_info[:2])

#: What the check computes for a listed name.
DIR, DB, OTHER = 1, 2, 3


class Row(tuple):
    """One directory the walk visited, as the check compares it: ``Row(abs_dir, names,
    sigs, others, tree)``.

    ``names`` is the directory's listing, in ``readdir`` order; ``sigs[i]`` the change
    signature of ``names[i]`` (``signatures.py``), or None for the few names in
    ``others``, each ``(i, what, value)`` with ``what`` one of ``DIR``, ``DB``, ``OTHER``
    (``unchanged``); ``tree`` names the tree whose walk wrote the row. A tuple with its
    fields named by hand (``typing.NamedTuple`` would double the console entry point's
    imports); on disk a plain tuple, as ``marshal`` writes no subclass.
    """

    __slots__ = ()

    def __new__(cls, abs_dir: str, names: list[str], sigs: list, others: list, tree: str):
        return tuple.__new__(cls, (abs_dir, names, sigs, others, tree))

    abs_dir = property(lambda row: row[0])
    names = property(lambda row: row[1])
    sigs = property(lambda row: row[2])
    others = property(lambda row: row[3])
    tree = property(lambda row: row[4])


class Quiet:
    """One snapshot (a plain class: ``typing`` alone would double the entry point's imports)."""

    FIELDS = ("inputs", "config_key", "state_sig", "result", "result_json", "absent", "present", "unmade",
              "remote")

    def __init__(self, inputs, config_key, state_sig, result, result_json, absent, present=(), unmade=(),
                 remote=None, dirs=None):
        self.inputs: str | None = inputs        # paths.inputs_key of the configuration, for cli/launch.py
        self.config_key: str = config_key       # digest of the effective configuration
        self.state_sig = tuple(state_sig)       # state.msgpack's stamp when written (marshal: a plain tuple)
        self.result: dict = result              # the idle checkpoint's result, as plain values
        self.result_json: str = result_json     # ... as ``--json`` prints it, with ``"seconds": 0.0``
        self.absent: list = absent              # dormant or missing tree paths: must still not be directories
        self.present: list = list(present)      # a local store's config file: must still be a regular file
        self.unmade: list = list(unmade)        # a local store's next manifest file: must still be absent
        self.remote: str | None = remote        # a cloud store's next manifest key: the caller HEADs it
        self.dirs: list[Row] | None = dirs      # every directory the walk visited

    def fields(self) -> tuple:
        return tuple(getattr(self, name) for name in self.FIELDS)


def quiet_path(state_dir: str) -> str:
    return os.path.join(state_dir, QUIET_FILE)


def save(state_dir: str, quiet: Quiet) -> None:
    """Replace the snapshot. Not fsynced: a lost or torn snapshot only costs a full walk.

    The file is a header, then the directory rows in ``PARTS`` parts of about as many
    names each (every part keeps the rows' order), so that the console entry point can
    check the parts in parallel processes, each decoding only its own part."""
    parts = [marshal.dumps([tuple(row) for row in rows]) for rows in _partition(quiet.dirs)]
    names = sum(len(row.names) for row in quiet.dirs)
    header = marshal.dumps((_TAG, quiet.fields(), names, [len(part) for part in parts]))
    path = quiet_path(state_dir)
    tmp = os.path.join(state_dir, TMP_DIR, f"{QUIET_FILE}.{os.getpid()}")
    os.makedirs(os.path.dirname(tmp), PRIVATE_DIR, exist_ok=True)  # its parent, the state directory, is there
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE),
                  "wb") as fh:
            for piece in (len(header).to_bytes(4, "big"), header, *parts):   # not joined: a copy of every row
                fh.write(piece)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _memo[path] = (file_stamp(path), quiet)


def _partition(rows: list[Row]) -> list[list[Row]]:
    parts: list[list[Row]] = [[] for _ in range(PARTS)]
    sizes = [0] * PARTS
    for row in rows:
        i = sizes.index(min(sizes))
        parts[i].append(row)
        sizes[i] += len(row.names)
    return parts


def discard(state_dir: str) -> None:
    path = quiet_path(state_dir)
    _memo.pop(path, None)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# A long-running process keeps the decoded snapshot while the file is the one it saw.
_memo: dict[str, tuple[tuple | None, Quiet]] = {}


class _File:
    """A snapshot file read, its header decoded and its parts not yet."""

    def __init__(self, quiet: Quiet, names: int, data: bytes, spans: list[tuple[int, int]]):
        self.quiet, self.names, self.data, self.spans = quiet, names, data, spans
        self._parts: dict[int, list[tuple]] = {}

    def part(self, i: int) -> list[tuple]:
        """The rows of part ``i``, as stored (plain tuples: ``unchanged`` takes them as they
        are), decoded once: a busy tick's check and its hand-over read each part again."""
        rows = self._parts.get(i)
        if rows is None:
            start, end = self.spans[i]
            rows = self._parts[i] = marshal.loads(memoryview(self.data)[start:end])
        return rows


def _read(path: str) -> _File | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        size = int.from_bytes(data[:4], "big")
        tag, fields, names, lengths = marshal.loads(memoryview(data)[4:4 + size])
        if tag != _TAG or len(lengths) != PARTS or 4 + size + sum(lengths) != len(data):
            return None
        spans, start = [], 4 + size
        for n in lengths:
            spans.append((start, start + n))
            start += n
        return _File(Quiet(*fields), names, data, spans)
    except (OSError, EOFError, ValueError, TypeError):
        return None


def load(state_dir: str) -> Quiet | None:
    """The whole snapshot, or None when there is none or it cannot be read (a row that is
    not a tuple of five fields among them)."""
    return stamped(state_dir)[1]


def stamped(state_dir: str) -> tuple[tuple | None, Quiet | None]:
    """``(stamp, load(state_dir))``: the snapshot and the stamp of the file it was read
    from (``local/watch.py`` settles on the file it read)."""
    path = quiet_path(state_dir)
    read = file_stamp(path)
    if read is None:
        return None, None
    memo = _memo.get(path)
    if memo is not None and memo[0] == read:
        return read, memo[1]
    snap = _read(path)
    if snap is None:
        return read, None
    try:
        snap.quiet.dirs = [Row(*row) for i in range(PARTS) for row in snap.part(i)]
    except (EOFError, ValueError, TypeError):
        return read, None
    _memo[path] = (read, snap.quiet)
    return read, snap.quiet


def idle_result(state_dir: str, state_file: str, *, config_key: str | None = None,
                inputs: str | None = None, fork: bool = False) -> Quiet | None:
    """The snapshot when it proves nothing changed since it was saved, else None; its
    ``result`` is the idle checkpoint's. Give ``config_key`` (in-process) or ``inputs``
    (the console entry point). ``fork``: the caller is single-threaded, and a large
    check may be split with a forked child (``_check_parts``)."""
    if fork:
        path = quiet_path(state_dir)
        read = file_stamp(path)
        snap = _read(path)
        quiet = snap.quiet if snap is not None else None
    else:
        quiet = load(state_dir)
    if quiet is None:
        return None
    if config_key is not None and quiet.config_key != config_key:
        return None
    if config_key is None and (inputs is None or quiet.inputs != inputs or quiet.remote is not None):
        return None
    if not _outside_holds(quiet, state_file):
        return None
    if not fork:
        return quiet if unchanged(quiet.dirs) else None
    checks = _check_parts(snap)
    if checks is not None and all(checks):
        return quiet
    if checks is not None:
        _hand_over(path, read, snap, checks)
    return None


def _outside_holds(quiet: Quiet, state_file: str) -> bool:
    """What the snapshot proves besides its rows: the state file is the one it was
    written after, no absent tree appeared, and a local store's config file is still
    there (an unmounted volume is never answered "idle": the full checkpoint refuses
    the vanished store), and no other writer committed the next checkpoint (a store that
    moved on is never answered "idle" either: the full checkpoint says so). A cloud
    store's next manifest is HEADed by the in-process caller; the console entry point,
    which has no store, leaves such a snapshot to the full command (``remote``)."""
    return (file_stamp(state_file) == tuple(quiet.state_sig)
            and not any(os.path.isdir(p) for p in quiet.absent)
            and all(os.path.isfile(p) for p in quiet.present)
            and not any(os.path.lexists(p) for p in quiet.unmade))


def _hand_over(path: str, read: tuple | None, snap: _File, checks: list[bool]) -> None:
    """Keep what a busy tick's check found (the decoded rows, each row's verdict) for
    ``same_rows`` of the full checkpoint this process runs next: the rows need not be
    checked twice. The verdicts stand only for this snapshot file (``_memo``'s stamp:
    a snapshot saved since is another ``Quiet``), with the state file it was written
    after (``same_rows`` compares its stamp), and are used once."""
    try:
        snap.quiet.dirs = [Row(*row) for i in range(PARTS) for row in snap.part(i)]
    except (EOFError, ValueError, TypeError):
        return
    if read is None or len(snap.quiet.dirs) != len(checks):
        return
    _memo[path] = (read, snap.quiet)
    _checked[path] = (snap.quiet, checks)


#: A busy tick's verdicts from the console path's check, by snapshot path (``_hand_over``).
_checked: dict[str, tuple[Quiet, list[bool]]] = {}


def same_rows(state_dir: str, state_file: str, *, config_key: str,
              fork: bool = False, trusted: frozenset[str] = frozenset()) -> tuple[Quiet | None, dict]:
    """In-process: ``(snapshot, same)``. ``snapshot`` is the snapshot when nothing changed
    (the idle answer), else None; ``same`` maps ``(tree, absolute path)`` of every
    directory whose listing and values all check equal to that tree's row, for the
    full walk of that tree to take as it was (``walk.walk_tree``). It is empty when the
    snapshot is missing, not valid, or holds a row it cannot read (then it is dropped).
    ``fork``: a large check may be split with a forked child when this process runs a
    single thread (``_row_checks``). When this process's console path checked every row
    of this very snapshot file this tick (``_hand_over``), its verdicts are taken and no
    row is checked again. A row whose directory is in ``trusted`` (``local/watch.py``:
    watched, and nothing happened in it) is taken unchecked."""
    handed = _checked.pop(quiet_path(state_dir), None)
    quiet = load(state_dir)
    if quiet is None or quiet.config_key != config_key or not _outside_holds(quiet, state_file):
        return None, {}
    try:
        if handed is not None and handed[0] is quiet:
            checks = handed[1]  # this process's console path checked every row this tick
        elif trusted:
            ask = [row for row in quiet.dirs if row.abs_dir not in trusted]
            answers = iter(_row_checks(ask, fork))
            checks = [True if row.abs_dir in trusted else next(answers) for row in quiet.dirs]
        else:
            checks = _row_checks(quiet.dirs, fork)
        same = {(row.tree, row.abs_dir): row for row, ok in zip(quiet.dirs, checks) if ok}
    except (TypeError, ValueError):  # a field of a row is not what a row holds
        discard(state_dir)
        return None, {}
    return (quiet if all(checks) else None), same


def _row_checks(rows: list[Row], fork: bool) -> list[bool]:
    """``unchanged`` of each row. With ``fork``, on a large snapshot, two CPUs and a
    process that runs one thread only (forking a threaded process is not safe), a
    child checks every other row and sends its answers through a pipe."""
    if not (fork and sum(len(row.names) for row in rows) >= SPLIT_MIN_NAMES
            and len(os.sched_getaffinity(0)) >= 2 and _one_thread()):
        return [unchanged((row,)) for row in rows]
    import signal

    # Every signal waits until the check is over: the child must never run this
    # process's handlers (a supervisor's SIGTERM handler, say).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        mine, theirs = _with_child(lambda: [unchanged((row,)) for row in rows[0::2]],
                                   lambda: bytes(unchanged((row,)) for row in rows[1::2]))
    except OSError:  # no pipe or no fork to be had: one process checks it all
        return [unchanged((row,)) for row in rows]
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if len(theirs) != len(rows[1::2]):  # the child failed: what it did not answer changed
        theirs = bytes(len(rows[1::2]))
    checks = [False] * len(rows)
    checks[0::2] = mine
    checks[1::2] = [bool(b) for b in theirs]
    return checks


def _one_thread() -> bool:
    """True when this process runs one thread: Python's, and any a library started."""
    import threading

    if threading.active_count() != 1:
        return False
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[17]) == 1  # num_threads (field 20; fields counted after the name)
    except (OSError, IndexError, ValueError):
        return False


#: The parts a snapshot's rows are saved in: one for each process that checks them.
PARTS = 2
#: Below this many names, a fork costs more than the half of the check it saves.
SPLIT_MIN_NAMES = 4000


def _check_parts(snap: _File) -> list[bool] | None:
    """``unchanged`` of every row, part 0's rows then part 1's; None when a part does not
    decode. When the check is large and a second CPU is there, a forked child decodes
    and checks the second part while this process does the first: the ``lstat`` calls
    are the cost, and in one process they hold the GIL. The child writes a byte per row
    and then ``_DONE``; a row it did not answer counts as changed. Every row is checked,
    not only up to the first difference: on a busy tick the verdicts go on to the full
    checkpoint (``_hand_over``), which takes the unchanged directories as they were."""
    try:
        if snap.names < SPLIT_MIN_NAMES or len(os.sched_getaffinity(0)) < 2:
            return [unchanged((row,)) for i in range(PARTS) for row in snap.part(i)]
        mine, theirs = _with_child(lambda: [unchanged((row,)) for row in snap.part(0)],
                                   lambda: bytes(unchanged((row,)) for row in snap.part(1)) + _DONE)
        if theirs.endswith(_DONE) and all(mine) and all(theirs[:-1]):
            return mine + [True] * (len(theirs) - 1)  # idle: part 1 need not be decoded here
        rows = len(snap.part(1))
    except (OSError, EOFError, ValueError, TypeError):
        return None
    answered = [bool(b) for b in theirs[:-1]] if theirs.endswith(_DONE) else []
    return mine + (answered + [False] * rows)[:rows] if len(answered) <= rows else None


#: What a forked child writes after its verdicts: its answer is whole.
_DONE = b"\x02"


def _with_child(mine, theirs):
    """``(mine(), bytes)``: ``theirs()`` runs in a forked child and its bytes come back
    through a pipe (empty or short when the child failed or was stopped). The answer
    never depends on the child's exit status, which a caller that ignores SIGCHLD (some
    cron and supervisor setups pass that on) would have the kernel reap and lose."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its answer goes through the pipe; nothing else of it runs
        try:
            os.close(read_fd)
            answer = theirs()
            while answer:
                answer = answer[os.write(write_fd, answer):]
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        result = mine()
        chunks = []
        while chunk := os.read(read_fd, 1 << 16):
            chunks.append(chunk)
        return result, b"".join(chunks)
    finally:
        os.close(read_fd)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # reaped already (SIGCHLD ignored): the pipe said all there is


def unchanged(dirs) -> bool:
    """True when every listed directory lists the same names and every name checks equal.

    ``dirs``: ``Row``s, or the plain tuples they are stored as. A row of any other shape
    (the file is not checksummed) is a difference, never an error."""
    lstat = os.lstat
    try:
        for path, names, sigs, others, _tree in dirs:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                if os.listdir(fd) != names:
                    return False
                # Each name's ``Signature`` (``signatures.py``), as the plain tuple a row holds.
                got = [(st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode) for st in [lstat(n, dir_fd=fd) for n in names]]
                for i, what, want in others:
                    if _other(what, got[i][3], path, names[i]) != want:
                        return False
                    got[i] = None
                if got != sigs and _clamped(got) != sigs:
                    return False
            finally:
                os.close(fd)
    except (OSError, ValueError, TypeError, IndexError):
        return False
    return True


def _clamped(got: list) -> list:
    """``got`` as signatures hold it: each time clamped (``signatures.mtime_ns``). Only a
    listing that differs is looked at again this way (a file's time past 2262)."""
    named = (None if g is None else Signature.of(g) for g in got)
    return [sig and Signature(sig.size, clamp_mtime(sig.mtime_ns), sig.ino, sig.mode) for sig in named]


def _other(what: int, mode: int, path: str, name: str):
    if what == DIR:
        return (0, 0, 0, mode)   # a ``DirSignature``, as the plain tuple a row holds
    if what == OTHER:
        return stat_mod.S_IFMT(mode)
    return live_signature(os.path.join(path, name)) if stat_mod.S_ISREG(mode) else None
