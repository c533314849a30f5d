"""The systems measured, each run as child processes on the same workload.

* ``JournalSys``: ``journal checkpoint --json`` with a local-directory store, and
  ``journal restore --to``; also the same calls in-process, as ``journal supervise``
  makes them;
* ``LegacySys``: the design journal replaces, as a shell script: ``find -newer stamp``,
  ``rsync -a --files-from`` over the changed files (a Python copy when rsync is
  missing), then ``sqlite3 .backup`` + ``PRAGMA quick_check`` + a copy of each changed
  database, skipped when its stat (db and -wal size and mtime) is unchanged;
* ``ResticSys``: ``restic backup`` of the same trees, when restic is installed.

``Tools`` says which baselines are installed; ``LibJournal`` drives journal through the
library to build long histories fast (the gc part).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from .measure import RECORD_HEADER, RECORD_KINDS, Child, figure, log, run_child, snapshot, tree_stats, uploaded
from .workload import write_file

LEGACY_SCRIPT = r"""#!/usr/bin/env bash
# The legacy design, one tick. Every file changed since the last tick is copied whole
# (find -newer stamp, then rsync -a --files-from); every database whose stat (db and
# -wal size and mtime) changed is copied whole after sqlite3 .backup + quick_check.
# usage: legacy_tick.sh SRC DEST STATE
# env:   LEGACY_TREES, LEGACY_DBS (relative to SRC), LEGACY_COPY=rsync|python,
#        LEGACY_SQLITE=cli|python, LEGACY_PYTHON, LEGACY_HELPER
set -euo pipefail
src=$1 dest=$2 state=$3
mkdir -p "$dest/files" "$dest/db" "$state"
cd "$src"
touch "$state/stamp.next"
newer=()
if [ -e "$state/stamp" ]; then newer=(-newer "$state/stamp"); fi
trees=()
for t in $LEGACY_TREES; do if [ -e "$t" ]; then trees+=("$t"); fi; done
: > "$state/changed"
if [ ${#trees[@]} -gt 0 ]; then
  find "${trees[@]}" "${newer[@]}" \( -type f -o -type l \) ! -name '*.db' ! -name '*.db-wal' \
       ! -name '*.db-shm' ! -name '*.db-journal' -print0 > "$state/changed"
fi
if [ -s "$state/changed" ]; then
  if [ "$LEGACY_COPY" = rsync ]; then
    rsync -a --from0 --files-from="$state/changed" ./ "$dest/files/"
  else
    "$LEGACY_PYTHON" "$LEGACY_HELPER" copy "$state/changed" . "$dest/files"
  fi
fi
for db in $LEGACY_DBS; do
  [ -e "$db" ] || continue
  sig=$(stat -c '%s %.9Y' "$db" "$db-wal" 2>/dev/null || true)
  sigfile="$state/sig.${db//\//_}"
  if [ -e "$sigfile" ] && [ "$(cat "$sigfile")" = "$sig" ]; then continue; fi
  tmp="$state/backup.db"
  rm -f "$tmp"
  if [ "$LEGACY_SQLITE" = cli ]; then
    sqlite3 "$db" ".backup '$tmp'"
    check=$(sqlite3 "$tmp" 'PRAGMA quick_check;')
  else
    check=$("$LEGACY_PYTHON" "$LEGACY_HELPER" backup "$db" "$tmp")
  fi
  if [ "$check" != ok ]; then echo "legacy: quick_check of $db failed: $check" >&2; exit 1; fi
  mkdir -p "$dest/db/$(dirname "$db")"
  cp "$tmp" "$dest/db/$db"
  rm -f "$tmp"
  printf '%s' "$sig" > "$sigfile"
done
mv "$state/stamp.next" "$state/stamp"
"""

LEGACY_HELPER = r'''"""Fallbacks of the legacy script when rsync or the sqlite3 CLI is missing."""
import os, shutil, sqlite3, sys

def copy(listfile, src, dest):
    with open(listfile, "rb") as fh:
        names = [n for n in fh.read().split(b"\0") if n]
    for name in names:
        s, d = os.path.join(os.fsencode(src), name), os.path.join(os.fsencode(dest), name)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        tmp = d + b".legacy-tmp"
        if os.path.islink(s):
            os.symlink(os.readlink(s), tmp)
        else:
            shutil.copy2(s, tmp)
        os.replace(tmp, d)

def backup(db, tmp):
    src, dst = sqlite3.connect(db), sqlite3.connect(tmp)
    src.backup(dst)
    dst.close(); src.close()
    con = sqlite3.connect(tmp)
    print(con.execute("PRAGMA quick_check").fetchone()[0])
    con.close()

def tree(src, dest):
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)

if __name__ == "__main__":
    {"copy": copy, "backup": backup, "tree": tree}[sys.argv[1]](*sys.argv[2:])
'''


class Tools:
    """Which baselines are available, and how the legacy system copies."""

    def __init__(self, install: bool):
        if install:
            self.install()
        self.rsync = shutil.which("rsync")
        self.restic = shutil.which("restic")
        self.sqlite3 = shutil.which("sqlite3")
        self.legacy_copy = "rsync" if self.rsync else "python"
        self.legacy_sqlite = "cli" if self.sqlite3 else "python"
        self.journal = [str(Path(sys.executable).parent / "journal")]
        if not os.access(self.journal[0], os.X_OK):
            self.journal = [sys.executable, "-m", "journal"]

    @staticmethod
    def install() -> None:
        log("--install-baselines: apt-get install -y rsync restic sqlite3")
        cmd = ["apt-get", "install", "-y", "rsync", "restic", "sqlite3"]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update"], stdout=subprocess.DEVNULL, check=True)
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)

    def versions(self) -> dict:
        def first_line(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
            except (OSError, IndexError):
                return None
        return {"rsync": first_line(["rsync", "--version"]) if self.rsync else None,
                "restic": first_line(["restic", "version"]) if self.restic else None,
                "sqlite3_cli": first_line(["sqlite3", "--version"]) if self.sqlite3 else None,
                "sqlite3_python": sqlite3.sqlite_version,
                "journal": first_line(self.journal + ["--version"]),
                "legacy_copy": self.legacy_copy, "legacy_sqlite": self.legacy_sqlite}


def journal_breakdown(store: str, paths: list[str]) -> tuple[dict[str, int], int]:
    """Bytes of the new store objects by record kind (data pack, index pack, manifest),
    and how many records they hold. Only a plain store's records are read: an encrypted
    store's are sealed (design §22), and its packs and manifests count as ``sealed``."""
    kinds: dict[str, int] = {}
    records = 0
    for rel in paths:
        full = os.path.join(store, rel)
        if not rel.startswith(("packs/", "manifests/")):
            kinds["other"] = kinds.get("other", 0) + os.path.getsize(full)
            continue
        with open(full, "rb") as fh:
            pos, size = 0, os.fstat(fh.fileno()).st_size
            while pos + RECORD_HEADER.size <= size:
                fh.seek(pos)
                magic, _v, kind, _f, _raw, stored, _d = RECORD_HEADER.unpack(fh.read(RECORD_HEADER.size))
                if magic != b"JRNL":
                    kinds["sealed"] = kinds.get("sealed", 0) + size - pos
                    break
                name = RECORD_KINDS.get(kind, "other")
                kinds[name] = kinds.get(name, 0) + RECORD_HEADER.size + stored
                records += 1
                pos += RECORD_HEADER.size + stored
    return kinds, records


class JournalSys:
    """journal with a local-directory store; encrypted (design §22) when ``key_file`` is
    given: ``init`` then makes the store with ``init --encrypt`` and a new key file there,
    and every command finds the key through ``$JOURNAL_KEY_FILE``. ``state_dir`` puts
    the local state outside the trees (``$JOURNAL_STATE_DIR``), so two stores may
    checkpoint the same trees."""

    name = "journal"

    def __init__(self, tools: Tools, local: str, store: str, home: str, key_file: str | None = None,
                 name: str | None = None, state_dir: str | None = None):
        self.tools = tools
        self.local, self.store, self.home, self.key_file = local, store, home, key_file
        self.name = name or self.name
        os.makedirs(home, exist_ok=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
                    "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_DATA_HOME": os.path.join(home, ".data"),
                    "AM_LOCAL": local, "JOURNAL_STORE": store}
        if key_file:
            self.env["JOURNAL_KEY_FILE"] = key_file
        if os.environ.get("PYTHONPATH"):   # a bench of a copy of the code runs that copy's CLI too
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        if state_dir:
            self.env["JOURNAL_STATE_DIR"] = state_dir

    def init(self) -> None:
        """Make the store (outside any measurement): ``journal init``, with ``--encrypt``
        and a new key file when the store is encrypted."""
        extra = ["--encrypt", "--key-file", self.key_file] if self.key_file else []
        run_child(self.tools.journal + ["init"] + extra, env=self.env)

    def tick(self) -> dict:
        def command():
            child = run_child(self.tools.journal + ["checkpoint", "--json"], env=self.env)
            rep = json.loads(child.out)
            return child, {"objects": rep.get("objects_uploaded"), "bytes": rep.get("bytes_uploaded"),
                           "seq": rep.get("seq"), "seconds": rep.get("seconds")}
        return self._uploaded_figure(command)

    def _uploaded_figure(self, run) -> dict:
        """The figure of one tick ``run()`` takes (it returns ``(Child, what journal
        reported)``), with what it uploaded to the store, by record kind."""
        before = snapshot(self.store)
        child, reported = run()
        objects, nbytes, paths = uploaded(before, snapshot(self.store))
        kinds, records = journal_breakdown(self.store, paths)
        return figure(child, objects, nbytes, reported=reported, by_kind=kinds, records=records)

    def restore(self, dest: str) -> dict:
        child = run_child(self.tools.journal + ["restore", "--to", dest, "--json"], env=self.env)
        files, size = tree_stats(dest)
        return figure(child, files=files, restored_bytes=size)

    def _library(self):
        """``(journal module, config, store)`` for a call through the library in this
        process, as `journal supervise` makes it; None when journal is not importable here."""
        try:
            import journal.checkpoint.run
            import journal.restore.run
            from journal.config import load_config
            from journal.store import open_store
        except ImportError:
            return None
        cfg = load_config(env=self.env)
        return journal, cfg, open_store(cfg.store)

    def in_process_idle(self) -> float | None:
        """A steady-state idle checkpoint through the library, in this process, as
        `journal supervise` runs its timer ticks (the second of two: the first loads the state)."""
        lib = self._library()
        if lib is None:
            return None
        journal, cfg, store = lib
        checkpoint = journal.checkpoint.run.checkpoint
        checkpoint(cfg, store)  # supervise's first tick loads the local state; later ticks reuse it
        t0 = time.perf_counter()
        result = checkpoint(cfg, store)
        wall = time.perf_counter() - t0
        return round(wall, 6) if result.objects == 0 else None

    def in_process_restore(self, dest: str) -> float | None:
        """A full restore into ``dest`` through the library, in this process, as
        `journal supervise` restores at start-up (no interpreter start, no imports)."""
        lib = self._library()
        if lib is None:
            return None
        journal, cfg, store = lib
        t0 = time.perf_counter()
        result = journal.restore.run.restore(cfg, store, to=dest)
        wall = time.perf_counter() - t0
        return round(wall, 6) if result.complete else None


class SupervisedJournal(JournalSys):
    """journal as `journal supervise` runs its timer ticks: through the library, in this
    process, with the configuration and store opened once and the local state kept
    between ticks (no interpreter start, no imports, no state decode after the first).
    Its own store and state directory (``state_dir``), so it checkpoints the same trees
    as the command-line journal beside it. A tick's CPU is this process's (every thread
    journal starts) plus that of any child it waited for."""

    name = "journal-supervise"

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._opened = None
        self._watch = None

    def _open(self):
        if self._opened is None:
            lib = self._library()
            if lib is None:
                raise RuntimeError("journal is not importable in the bench's interpreter")
            self._opened = lib
            self._watch = _watch()
        return self._opened

    def _watching(self) -> dict:
        return {} if self._watch is None else {"watch": self._watch}

    def settle(self) -> None:
        """One more tick, not measured: the supervisor's inotify watch (design §10, "The
        watch"), armed by the first tick, vouches for a directory from the third; every
        figure after this is a steady-state tick, as a supervisor running for a while has."""
        journal, cfg, store = self._open()
        journal.checkpoint.run.checkpoint(cfg, store, **self._watching())

    def tick(self) -> dict:
        import resource

        journal, cfg, store = self._open()

        def in_process():
            usage = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            r0 = [resource.getrusage(w) for w in usage]
            t0 = time.perf_counter()
            result = journal.checkpoint.run.checkpoint(cfg, store, **self._watching())
            wall = time.perf_counter() - t0
            r1 = [resource.getrusage(w) for w in usage]
            cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in zip(r0, r1))
            return Child(0, "", "", wall, cpu, r1[0].ru_maxrss), {"objects": result.objects, "seq": result.seq}
        return self._uploaded_figure(in_process)


class LegacySys:
    name = "legacy"

    def __init__(self, tools: Tools, work: str, local: str, dest: str, state: str, trees, dbs):
        self.tools = tools
        self.local, self.dest, self.state = local, dest, state
        script = os.path.join(work, "legacy_tick.sh")
        helper = os.path.join(work, "legacy_helper.py")
        if not os.path.exists(script):
            write_file(script, LEGACY_SCRIPT)
            os.chmod(script, 0o755)
            write_file(helper, LEGACY_HELPER)
        self.script, self.helper = script, helper
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                    "LEGACY_TREES": " ".join(trees), "LEGACY_DBS": " ".join(dbs),
                    "LEGACY_COPY": tools.legacy_copy, "LEGACY_SQLITE": tools.legacy_sqlite,
                    "LEGACY_PYTHON": sys.executable, "LEGACY_HELPER": helper}

    def tick(self) -> dict:
        before = snapshot(self.dest)
        child = run_child(["bash", self.script, self.local, self.dest, self.state], env=self.env)
        objects, nbytes, _ = uploaded(before, snapshot(self.dest))
        return figure(child, objects, nbytes)

    def restore(self, dest: str) -> dict:
        """``rsync -a`` of the durable copy back into an empty directory."""
        if self.tools.rsync:
            child = run_child(["rsync", "-a", self.dest + "/", dest + "/"], env=self.env)
        else:
            child = run_child([sys.executable, self.helper, "tree", self.dest, dest], env=self.env)
        files, size = tree_stats(dest)
        return figure(child, files=files, restored_bytes=size, tool=self.tools.legacy_copy)


class ResticSys:
    name = "restic"

    def __init__(self, tools: Tools, repo: str, cache: str, paths: list[str]):
        self.repo, self.paths = repo, paths
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cache, "RESTIC_PASSWORD": "bench",
                    "RESTIC_REPOSITORY": repo, "RESTIC_CACHE_DIR": cache, "LANG": "C.UTF-8"}
        run_child(["restic", "init", "--repository-version", "2"], env=self.env)

    def tick(self) -> dict:
        before = snapshot(self.repo)
        child = run_child(["restic", "backup", "--host", "bench", "--quiet", "--exclude", "*-shm"] + self.paths,
                          env=self.env)
        objects, nbytes, _ = uploaded(before, snapshot(self.repo))
        return figure(child, objects, nbytes)

    def restore(self, dest: str) -> dict:
        child = run_child(["restic", "restore", "latest", "--target", dest], env=self.env)
        files, size = tree_stats(dest)
        return figure(child, files=files, restored_bytes=size)


class LibJournal:
    """journal through the library, in this process: the fast way to build a long history
    (a checkpoint costs ~4 ms on tmpfs, against ~150 ms for a CLI start)."""

    def __init__(self, tools: Tools, root: str):
        from journal.checkpoint.run import checkpoint
        from journal.config import load_config
        from journal.store import open_store
        self.local = os.path.join(root, "local")
        self.tree = os.path.join(self.local, "codex-home")
        os.makedirs(self.tree)
        self.sys = JournalSys(tools, self.local, os.path.join(root, "store"), os.path.join(root, "home"))
        self.env = self.sys.env
        self.store_root = self.sys.store
        self._checkpoint = checkpoint
        self.cfg = load_config(env=self.env)
        self.store = open_store(self.store_root)

    def checkpoint(self) -> int:
        return self._checkpoint(self.cfg, self.store).seq


def _watch():
    """`journal supervise`'s inotify watch, when this tree's journal has one (an older
    tree's, run through ``PYTHONPATH``, has none and takes no ``watch``)."""
    try:
        from journal.local.watch import Watch
    except ImportError:
        return None
    return Watch()
