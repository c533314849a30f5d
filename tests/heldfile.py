"""A writer process that holds a transcript open, as an agent does, and changes it on command.

The process opens the file once (``O_RDWR``, created if missing) and keeps that
descriptor for its whole life: an append, a write over earlier bytes or a truncation
changes the same inode, with the same open file, while journal checkpoints it. Each
command is answered once it is done, so a test waits on that answer, never on a clock.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SCRIPT = r'''
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
print("ready", flush=True)
for line in sys.stdin:
    op, *args = line.split()
    if op == "append":
        os.pwrite(fd, bytes.fromhex(args[0]), os.fstat(fd).st_size)
    elif op == "write":
        os.pwrite(fd, bytes.fromhex(args[1]), int(args[0]))
    elif op == "truncate":
        os.ftruncate(fd, int(args[0]))
    print("ok", os.fstat(fd).st_mtime_ns, flush=True)
'''


class HeldFile:
    """``path`` held open by another process; ``append``, ``write_at`` and ``truncate``
    return the file's mtime (ns) right after the change."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "ready\n"

    def _do(self, *words: str) -> int:
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().split()
        assert answer[:1] == ["ok"], f"the writer failed: {answer}"
        return int(answer[1])

    def append(self, data: bytes) -> int:
        return self._do("append", data.hex())

    def write_at(self, offset: int, data: bytes) -> int:
        return self._do("write", str(offset), data.hex())

    def truncate(self, size: int) -> int:
        return self._do("truncate", str(size))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
        self.proc.stdout.close()

    def __enter__(self) -> "HeldFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
