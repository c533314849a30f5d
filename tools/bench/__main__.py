"""The command line: ``python tools/bench.py ...`` or ``python -m tools.bench ...``.

Runs the chosen parts (``parts.PARTS``) in order, each as child processes through the
spawner (``measure.py``), then prints the tables and the targets, and writes every
figure as JSON (``--json``) and the tables as markdown (``--markdown``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import __doc__ as PACKAGE_DOC
from .measure import KIB, log, rmtree, run_child, start_spawner, stop_spawner
from .parts import PARTS
from .report import report, summarize, targets
from .systems import Tools


def code_state() -> dict:
    """The journal code measured: the commit, and files with uncommitted changes (git status only)."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "--branch"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    commit = next((ln.split()[2] for ln in out.splitlines() if ln.startswith("# branch.oid")), None)
    changed = sorted(ln.split()[-1] for ln in out.splitlines() if ln[:1] in "12" and ln.split()[-1].startswith("journal/"))
    return {"commit": commit, "uncommitted_journal_files": changed}


def machine_info(work: str) -> dict:
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * KIB
    except OSError:
        pass
    cpu = None
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), None)
    except OSError:
        pass
    disk = None
    try:
        df = subprocess.run(["df", "-hT", work], capture_output=True, text=True).stdout.splitlines()[1].split()
        disk = {"device": df[0], "fstype": df[1], "size": df[2], "avail": df[4]}
    except (OSError, IndexError):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_bytes": mem, "disk": disk, "python": platform.python_version(),
            "kernel": platform.release(), "platform": platform.platform()}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=PACKAGE_DOC.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    p.add_argument("--scale", type=float, default=1.0, help="main workload scale (default 1.0: ~65 MiB of state)")
    p.add_argument("--runs", type=int, default=5, help="runs of the main and tree parts (default 5)")
    p.add_argument("--ticks", type=int, default=5, help="active ticks per main run (default 5)")
    p.add_argument("--big-file-mib", type=int, default=2048, help="size of the big file (default 2048)")
    p.add_argument("--big-runs", type=int, default=2,
                   help="runs of the big-file part (default 2: each moves ~8 GiB through the disk)")
    p.add_argument("--tree-files", type=_counts, default=[20000, 200000],
                   help="the tree part's sizes, in files, 500 to a directory (default 20000,200000; "
                        "add 1000000 to see how each figure grows)")
    p.add_argument("--tree-restores", type=int, default=2,
                   help="restores of each tree by journal and restic, interleaved (default 2)")
    p.add_argument("--db-mib", type=int, default=256, help="size of the large SQLite database (default 256)")
    p.add_argument("--db-runs", type=int, default=None, help="runs of the SQLite part (default: --runs)")
    p.add_argument("--db-txns", type=int, default=100, help="small transactions before the SQLite tick (default 100)")
    p.add_argument("--gc-objects", type=int, default=1_000_000,
                   help="objects in the store of the gc part (default 1,000,000; it also runs at a tenth of that)")
    p.add_argument("--gc-appends", type=int, default=5000,
                   help="appends (one per checkpoint) to the transcript of the gc part's restore (default 5000)")
    p.add_argument("--gc-checkpoints", type=int, default=10000,
                   help="checkpoints in the store of the gc part's second restore (default 10000)")
    p.add_argument("--gc-dir", metavar="DIR",
                   help="where the gc part builds its stores (default: /dev/shm when it has room, else the work dir)")
    p.add_argument("--link-rate", type=float, default=20.0,
                   help="the link part's bandwidth in MB/s, shared by every transfer (default 20)")
    p.add_argument("--link-latency", type=float, default=30.0,
                   help="the link part's time added per request, in ms (default 30)")
    p.add_argument("--link-runs", type=int, default=1, help="runs of the link part (default 1)")
    p.add_argument("--history-ticks", type=int, default=40320,
                   help="ticks of the history part's simulated week (default 40,320: a week of 15 s ticks)")
    p.add_argument("--history-at", type=_counts, default=[1, 1000, 10000],
                   help="checkpoints after which the history part measures (default 1,1000,10000; and the last)")
    p.add_argument("--history-scale", type=float, default=1.0, help="the history part's workload scale (default 1.0)")
    p.add_argument("--history-busy-every", type=int, default=12,
                   help="the history part's agents are busy every Nth tick, quiet (one event) on the others "
                        "(default 12: a burst every 3 minutes)")
    p.add_argument("--history-tick-seconds", type=float, default=15.0,
                   help="simulated seconds between the history part's ticks (default 15)")
    p.add_argument("--history-policies", type=lambda s: [x for x in s.split(",") if x], default=["deploy", "none"],
                   help="the history part's weeks: deploy (docs/deploy.md's retention) and/or none (default both)")
    p.add_argument("--history-full-limit", type=int, default=600,
                   help="seconds after which the history part stops a `verify --full` (default 600)")
    p.add_argument("--parts", default=",".join(PARTS), help="parts to run (default: all)")
    p.add_argument("--smoke", action="store_true",
                   help="a tiny version (small scale, 1 run, small files, a fast link) that produces every figure and judges no "
                        "target: its figures are too small to mean anything")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    p.add_argument("--markdown", metavar="FILE", help="write the result tables to FILE")
    p.add_argument("--workdir", metavar="DIR", help="work directory (default: a new temp dir, removed after)")
    p.add_argument("--install-baselines", action="store_true", help="apt-get install -y rsync restic sqlite3 first")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    args = p.parse_args(argv)
    if args.smoke and args.strict:
        p.error("--strict judges the targets; a --smoke run judges none")
    if args.smoke:
        args.scale, args.runs, args.ticks = 0.02, 1, 2
        args.big_file_mib, args.tree_files, args.db_mib, args.db_txns = 8, [300, 1000], 2, 20
        args.tree_restores = 1
        args.gc_objects, args.gc_appends, args.gc_checkpoints = 3000, 100, 200
        args.link_rate, args.link_latency = 200.0, 3.0   # a fast link: the figures, not the waits
        args.history_ticks, args.history_at, args.history_scale, args.history_busy_every = 200, [1, 50], 0.02, 4
        args.history_tick_seconds = 1800.0   # four simulated days: the daily gc runs
    if args.smoke:
        args.big_runs = 1
    args.db_runs = args.db_runs or args.runs
    args.parts = [x for x in args.parts.split(",") if x]
    return args

def _counts(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    tools = Tools(args.install_baselines)
    work = args.workdir or tempfile.mkdtemp(prefix="journal-bench-")
    os.makedirs(work, exist_ok=True)
    spawn_dir = tempfile.mkdtemp(prefix="spawn-", dir=work)
    start_spawner(spawn_dir)
    floor = run_child(["true"]).maxrss_kib  # the lowest peak RSS a child can report here
    res: dict = {"meta": {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]) if argv is None else " ".join(argv),
        "args": {k: v for k, v in vars(args).items()}, "machine": machine_info(work), "tools": tools.versions(),
        "code": code_state(), "loadavg_start": os.getloadavg()}}
    notes = baseline_notes(tools)
    res["meta"]["notes"] = notes
    for n in notes:
        log(n)
    try:
        for name, part in PARTS.items():
            if name in args.parts:
                t0 = time.perf_counter()
                res[name] = part.run(args, tools, work)
                res[name]["seconds"] = round(time.perf_counter() - t0, 1)
    finally:
        stop_spawner()
        if not args.workdir:
            rmtree(work)
        else:
            rmtree(spawn_dir)
    res["meta"]["rss_floor_kib"] = floor
    res["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    return finish(args, res, notes)


def baseline_notes(tools: Tools) -> list[str]:
    """What the run lacks, said in its output and in its JSON."""
    notes = []
    if not tools.rsync:
        notes.append("rsync is not installed: the legacy system copies with Python (shutil.copy2) instead, "
                     "and its restore baseline is a Python copytree, not `rsync -a`")
    if not tools.restic:
        notes.append("restic is not installed: the restic system was skipped (use --install-baselines)")
    if not tools.sqlite3:
        notes.append("the sqlite3 CLI is not installed: the legacy system backs up through Python's sqlite3")
    return notes


def finish(args, res: dict, notes: list[str]) -> int:
    """Summarize, judge and print; write the JSON and markdown files asked for."""
    parts = list(PARTS.values())
    res["summary"], res["ratios"], res["ratios_per_run"] = summarize(res, parts)
    res["targets"] = targets(res["summary"], res["ratios"], res, parts)
    if args.smoke:  # far too small to judge a target: the figures only, no verdicts
        res["targets"] = [{"name": t["name"], "detail": t["detail"]} for t in res["targets"]]
    res["meta"]["loadavg_end"] = os.getloadavg()
    tables = report(res, parts)
    print(tables)
    print()
    if args.smoke:
        print(f"smoke run: the figures of {len(res['targets'])} targets are produced; none is judged "
              "(a smoke run is too small; `make bench` judges them)")
    else:
        for t in res["targets"]:
            print(t["line"])
    print(f"\n({res['meta']['seconds']:.0f} s; {'; '.join(notes) if notes else 'all baselines installed'})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(tables + "\n\n" + "".join(t["line"] + "\n" for t in res["targets"] if "line" in t))
    failed = any(t.get("pass") is False for t in res["targets"])
    return 1 if (failed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
