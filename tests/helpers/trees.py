"""A tree described as restore must reproduce it."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import random
import shutil
import stat
from pathlib import Path

from journal.local.tree_tmp import PREFIX as TMP_PREFIX

#: journal's temp directory in a tree, as a killed restore leaves it.
LEFT_TMP = TMP_PREFIX + "*"


def describe(root: Path, skip: tuple[str, ...] = (), db=None) -> dict[str, tuple]:
    """path -> (kind, mode, mtime_ns, sha256 | target): what a restore must reproduce.
    Directories whose names match a pattern of ``skip`` (``fnmatch``) are left out; with
    ``db``, a ``*.db`` file is described by ``("db", mode, db(path))`` instead (its rows,
    not its bytes)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not any(fnmatch.fnmatchcase(d, pat) for pat in skip)]
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("symlink", mode, st.st_mtime_ns, os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            elif db is not None and name.endswith(".db"):
                out[rel] = ("db", mode, db(full))
            else:
                out[rel] = ("file", mode, st.st_mtime_ns, sha256_file(full))
    return out


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(4 << 20), b""):
            h.update(block)
    return h.hexdigest()


def random_change(rng: random.Random, root: Path, step: int, ops: list[str]) -> str:
    """One random change under ``root`` (an op from ``ops``; "none" does nothing); returns
    the op. Symlinks the ops made are neither files nor directories to change."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    dirs = sorted([root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())])
    subdirs = [d for d in dirs if d != root]
    op = rng.choice(ops)
    if op == "append" and files:
        with open(rng.choice(files), "ab") as fh:
            fh.write(b'{"n": %d}\n' % step)
    elif op == "create":
        (rng.choice(dirs) / f"s{step}.jsonl").write_bytes(b'{"a": 1}\n')
    elif op == "delete" and files:
        rng.choice(files).unlink()
    elif op == "rename" and files:
        rng.choice(files).rename(rng.choice(dirs) / f"r{step}.jsonl")
    elif op == "mkdir":
        (rng.choice(dirs) / f"d{step}").mkdir()
    elif op == "rmdir":
        empty = [d for d in subdirs if not any(d.iterdir())]
        if empty:
            rng.choice(empty).rmdir()
    elif op == "rmtree" and subdirs:
        shutil.rmtree(rng.choice(subdirs))
    elif op == "renamedir" and subdirs:
        moved, into = rng.choice(subdirs), rng.choice(dirs)
        if not str(into).startswith(str(moved)):
            moved.rename(into / f"m{step}")
    elif op == "chmod" and files:
        rng.choice(files).chmod(0o600 if step % 2 else 0o644)
    elif op == "touch" and files:
        os.utime(rng.choice(files))
    elif op == "file2dir" and files:
        was = rng.choice(files)
        was.unlink()
        was.mkdir()
        (was / "x.jsonl").write_bytes(b"{}\n")
    elif op == "dir2file" and subdirs:
        was = rng.choice(subdirs)
        shutil.rmtree(was)
        was.write_bytes(b'{"was": "dir"}\n')
    elif op == "symlink":
        (rng.choice(dirs) / f"l{step}").symlink_to("nowhere")
    return op
