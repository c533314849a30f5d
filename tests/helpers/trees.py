"""A tree described as restore must reproduce it."""

from __future__ import annotations

import fnmatch
import hashlib
import os
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
