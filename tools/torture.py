#!/usr/bin/env python3
"""journal's torture run: random kill -9 and fault trials, kill sweeps, decoder fuzzing,
damage sweeps and the lineage model (``tools/reliability/``). ``make torture`` runs the
full form; ``make test`` runs a short form of each (``tests/test_torture_short.py``,
``tests/test_fuzz_decoders.py``, ``tests/test_damage_sweep.py``,
``tests/test_model_lineage.py``).

Usage::

    .venv/bin/python tools/torture.py --trials 500 --store local --seed 1
    .venv/bin/python tools/torture.py --store hfsim --seed 1 --trial 17      # replay one trial
    .venv/bin/python tools/torture.py --sweeps 1 --fuzz 0 --trials 0         # every kill point
    .venv/bin/python tools/torture.py --trials 0 --fuzz 100000 --damage      # decoders, damages
    .venv/bin/python tools/torture.py --trials 0 --lineage 200 --seed 1      # 2-3 containers, one store

Each part prints one summary line (``torture: N trials ..., K kills, F faults, V
violations``); every violation is printed on a line of its own with the command that
replays it, and the run exits 1 if there was any. ``--json FILE`` writes the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.reliability.damage import DamageSweep  # noqa: E402
from tools.reliability.fuzz import fuzz  # noqa: E402
from tools.reliability.lineage import run_lineage  # noqa: E402
from tools.reliability.sweeps import OPERATIONS, Sweep  # noqa: E402
from tools.reliability.trials import STORES, Torture  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=50, help="random trials to run (default 50)")
    parser.add_argument("--trial", type=int, help="run only this trial (a replay)")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000, help="the run's seed")
    parser.add_argument("--store", choices=STORES, default="local", help="the store the trials use")
    parser.add_argument("--sweeps", type=int, default=0, metavar="STRIDE",
                        help="kill sweeps: SIGKILL at every STRIDE-th file-system call (1: every one; 0: none)")
    parser.add_argument("--fuzz", type=int, default=0, metavar="N", help="fuzz every decoder with N inputs")
    parser.add_argument("--damage", action="store_true", help="run the damage sweep (every object, every damage)")
    parser.add_argument("--lineage", type=int, default=0, metavar="N",
                        help="run N examples of the lineage model: 2-3 containers on one local store, stale and "
                             "hot restarts, refused writers, rollbacks, takeover, kills, gc")
    parser.add_argument("--workdir", help="where trials run (default: a new temp directory)")
    parser.add_argument("--json", dest="json_out", help="write the counts of every part to this file")
    args = parser.parse_args(argv)
    if args.sweeps and args.store == "s3":
        parser.error("--sweeps copies the store before every kill point: use --store local or hfsim")

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="journal-torture-"))
    report: dict = {"seed": args.seed, "store": args.store, "argv": sys.argv[1:] if argv is None else argv,
                    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "commit": _commit(),
                    "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0]}}
    violations = 0
    started = time.monotonic()
    if args.trials or args.trial is not None:
        torture = Torture(workdir / f"trials-{args.store}", args.store, args.seed)
        try:
            tally = torture.run(range(args.trial, args.trial + 1) if args.trial is not None else args.trials,
                                progress=_progress)
        finally:
            torture.close()
        for v in tally.violations:
            print(v.line())
        print(tally.line(), flush=True)
        violations += len(tally.violations)
        report["trials"] = {"trials": tally.trials, "kills": tally.kills, "kills_late": tally.kills_late,
                            "faults": tally.faults, "faults_missed": tally.faults_missed,
                            "actions": dict(tally.actions), "violations": [v.line() for v in tally.violations]}
    if args.sweeps:
        report["sweeps"] = {}
        for operation in OPERATIONS:
            result = Sweep(workdir / f"sweep-{args.store}-{operation}", operation, args.store, args.seed).run(
                stride=args.sweeps)
            for problem in result.problems:
                print(f"VIOLATION sweep {operation} ({args.store} store, seed {args.seed}): {problem} [replay: "
                      f"tools/torture.py --store {args.store} --seed {args.seed} --trials 0 --sweeps {args.sweeps}]")
            print(result.line(), flush=True)
            violations += len(result.problems)
            report["sweeps"][operation] = {"calls": result.calls, "points": result.points, "kills": result.kills,
                                           "violations": result.problems}
    if args.fuzz:
        report["fuzz"] = {}
        for result in fuzz(args.fuzz, seed=args.seed, workdir=workdir):
            for finding in result.findings:
                saved = workdir / f"fuzz-{finding.decoder}-{finding.index}.bin"
                saved.write_bytes(finding.data)
                print(f"VIOLATION {finding.line()} [input saved as {saved}; replay: tools/torture.py --seed "
                      f"{args.seed} --trials 0 --fuzz {args.fuzz}]")
            print(result.line(), flush=True)
            violations += len(result.findings)
            report["fuzz"][result.decoder] = {"inputs": result.inputs, "typed_errors": result.typed_errors,
                                              "slowest_ms": round(result.slowest * 1000, 1),
                                              "findings": [f.line() for f in result.findings]}
    if args.damage:
        result = DamageSweep(workdir / "damage", seed=args.seed).run(every=True, seed=args.seed)
        for problem in result.problems:
            print(f"VIOLATION damage: {problem} [replay: tools/torture.py --seed {args.seed} --trials 0 --damage]")
        print(result.line(), flush=True)
        violations += len(result.problems)
        report["damage"] = {"cases": result.cases, "by_target": result.by_target, "reported": result.reported,
                            "must_report": result.must_report, "restores": result.restores,
                            "violations": result.problems}
    if args.lineage:
        result = run_lineage(args.lineage, args.seed, workdir / "lineage")
        for problem, saved in zip(result.problems, result.saved):
            print(f"VIOLATION lineage (seed {args.seed}): {problem} [steps saved as {saved}; replay: "
                  f"tools/torture.py --seed {args.seed} --trials 0 --lineage {args.lineage}]")
        print(result.line(), flush=True)
        violations += len(result.problems)
        report["lineage"] = {"examples": result.examples, "runs": result.runs, "steps": result.steps,
                             "kills": result.kills, "refusals": result.refusals, "stale": result.stale,
                             "forks": result.forks, "rollbacks": result.rollbacks, "expired": result.expired,
                             "violations": result.problems}
    report["seconds"] = round(time.monotonic() - started, 1)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 1 if violations else 0


def _progress(tally) -> None:
    """The running count: on a terminal in place, else every 50 trials on a line."""
    if os.isatty(2):
        print(f"\r{tally.line()}", end="", file=sys.stderr, flush=True)
    elif tally.trials % 50 == 0:
        print(f"... {tally.line()}", file=sys.stderr, flush=True)


def _commit() -> str | None:
    import subprocess

    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


if __name__ == "__main__":
    sys.exit(main())
