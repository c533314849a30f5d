"""Running children and measuring them: wall and CPU time, peak RSS, bytes and objects written.

Every system runs as a child process started by a small spawner (``start_spawner``),
so wall and CPU time are measured alike for all of them. Bytes and objects "uploaded"
are measured the same way for every system: the destination directory is listed with
sizes, mtimes and inodes before and after (``snapshot``), and every file that is new
or changed counts once, at its full size (``uploaded``).
"""

from __future__ import annotations

import marshal
import os
import shutil
import struct
import subprocess
import sys
import time

MIB = 1 << 20
KIB = 1 << 10

# The record header of docs/design.md section 4 (read here only to break journal's
# bytes down by record kind).
RECORD_HEADER = struct.Struct(">4sBBHQQ32s")
RECORD_KINDS = {1: "chunk", 2: "segment", 3: "page", 4: "manifest", 5: "pagemap", 6: "dbpage"}


def record_kind(head: bytes) -> str | None:
    """The kind of the record whose header ``head`` is, or None when it is not one."""
    if len(head) < RECORD_HEADER.size or head[:4] != b"JRNL":
        return None
    return RECORD_KINDS.get(RECORD_HEADER.unpack_from(head)[2], "other")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Child:
    """One finished child process: exit code, output, wall and CPU seconds, peak RSS."""

    def __init__(self, rc, out, err, wall, cpu, maxrss_kib):
        self.rc, self.out, self.err = rc, out, err
        self.wall, self.cpu, self.maxrss_kib = wall, cpu, maxrss_kib


# Children are started by a small, long-lived spawner process, not by this one: Linux
# carries a process's RSS high-water mark across exec (signal->maxrss), so a child
# forked from this large Python process would report at least this process's RSS as
# its peak. The spawner stays small (a bare interpreter, ~9 MiB), forks and execs
# each child, measures wall time around fork..wait4, CPU as the RUSAGE_CHILDREN delta
# and peak RSS from wait4, and reports them back over a pipe.
SPAWNER = r"""
import marshal, os, resource, sys, time
rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
os.set_inheritable(rfd, False)
os.set_inheritable(wfd, False)
while True:
    head = os.read(rfd, 8)
    if len(head) < 8:
        break
    n = int.from_bytes(head, "big")
    buf = b""
    while len(buf) < n:
        buf += os.read(rfd, n - len(buf))
    cmd, env, cwd, out, err = marshal.loads(buf)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            if cwd:
                os.chdir(cwd)
            fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
            os.execvpe(cmd[0], cmd, env)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    reply = marshal.dumps((os.waitstatus_to_exitcode(status), wall, cpu, ru.ru_maxrss))
    os.write(wfd, len(reply).to_bytes(8, "big") + reply)
"""


class Spawner:
    def __init__(self, tmpdir: str):
        self.tmpdir = tmpdir
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", SPAWNER, str(req_r), str(rep_w)],
                                     pass_fds=(req_r, rep_w), stdin=subprocess.DEVNULL)
        os.close(req_r)
        os.close(rep_w)

    def run(self, cmd: list[str], env: dict | None, cwd: str | None) -> tuple[int, str, str, float, float, int]:
        out, err = os.path.join(self.tmpdir, "child.out"), os.path.join(self.tmpdir, "child.err")
        req = marshal.dumps((list(cmd), dict(os.environ if env is None else env), cwd, out, err))
        os.write(self.req_w, len(req).to_bytes(8, "big") + req)
        head = self._read(8)
        rc, wall, cpu, maxrss = marshal.loads(self._read(int.from_bytes(head, "big")))
        with open(out, "rb") as fh:
            stdout = fh.read().decode(errors="replace")
        with open(err, "rb") as fh:
            stderr = fh.read().decode(errors="replace")
        return rc, stdout, stderr, wall, cpu, maxrss

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            piece = os.read(self.rep_r, n - len(buf))
            if not piece:
                raise RuntimeError("the spawner process died")
            buf += piece
        return buf

    def close(self) -> None:
        os.close(self.req_w)
        self.proc.wait()
        os.close(self.rep_r)


_SPAWNER: Spawner | None = None


def start_spawner(tmpdir: str) -> None:
    """Start the spawner every ``run_child`` goes through (``tmpdir`` holds its output files)."""
    global _SPAWNER
    _SPAWNER = Spawner(tmpdir)


def stop_spawner() -> None:
    _SPAWNER.close()


def run_child(cmd: list[str], env: dict | None = None, cwd: str | None = None, check: bool = True) -> Child:
    """Run ``cmd`` to completion through the spawner; see SPAWNER."""
    child = Child(*_SPAWNER.run(cmd, env, cwd))
    if check and child.rc != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... exited {child.rc}:\n{child.err[-2000:]}\n{child.out[-1000:]}")
    return child


def snapshot(root: str, skip: tuple[str, ...] = (".tmp", "locks")) -> dict[str, tuple[int, int, int]]:
    """Every regular file under ``root``: relative path -> (size, mtime_ns, inode)."""
    found: dict[str, tuple[int, int, int]] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(root, rel) if rel else root)
        except FileNotFoundError:
            continue
        with it:
            for d in it:
                path = f"{rel}/{d.name}" if rel else d.name
                if not rel and d.name in skip:
                    continue
                if d.is_dir(follow_symlinks=False):
                    stack.append(path)
                elif d.is_file(follow_symlinks=False):
                    st = d.stat(follow_symlinks=False)
                    found[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def uploaded(before: dict, after: dict) -> tuple[int, int, list[str]]:
    """(objects, bytes, paths) created or changed between two snapshots, at full size."""
    paths = sorted(p for p, sig in after.items() if before.get(p) != sig)
    return len(paths), sum(after[p][0] for p in paths), paths


def figure(child: Child, objects: int | None = None, nbytes: int | None = None, **extra) -> dict:
    fig = {"bytes": nbytes, "objects": objects, "wall_s": round(child.wall, 6), "cpu_s": round(child.cpu, 6),
           "maxrss_kib": child.maxrss_kib}
    fig.update(extra)
    return fig


def tree_stats(root: str, skip_names: tuple[str, ...] = ()) -> tuple[int, int]:
    """(regular files, bytes) under ``root``."""
    files = size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip_names]
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if os.path.isfile(os.path.join(dirpath, name)) and not os.path.islink(os.path.join(dirpath, name)):
                files += 1
                size += st.st_size
    return files, size


def copy_tree(src: str, dst: str) -> None:
    """A faithful copy (mtimes, modes) of a template tree, outside any measurement."""
    if shutil.which("cp"):
        subprocess.run(["cp", "-a", src, dst], check=True)
    else:
        shutil.copytree(src, dst, symlinks=True)


def rmtree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def rotate(items: list, k: int) -> list:
    """``items`` started at ``k``: the systems run interleaved, in an order that rotates."""
    k %= len(items)
    return items[k:] + items[:k]


def flush_disk() -> None:
    """Write every dirty page out (``sync``), outside any timing, so that the command
    timed next does not pay for the writeback of an earlier step's bytes (the big
    file just written, or the copy an ``rsync`` left unwritten); then, where this
    process may (root), drop the clean page cache, so that every timed command starts
    from the same place: its reads come from the disk, and its writes land in pages
    no earlier step left warm or cold (on this VM a write into pages the host took back
    costs several times one into pages just freed)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3")
    except OSError:
        pass


def settle() -> None:
    """Let file timestamps move on (find -newer compares mtimes at the kernel's clock granularity)."""
    time.sleep(0.02)
