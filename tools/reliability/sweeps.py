"""Kill sweeps: SIGKILL an operation at every Nth file-system call, then the checks.

A sweep builds its scenario once, as a *template* directory (a container whose agent
has stopped, and its store), counts the operation's file-system calls on a copy
(``faults.KillHook``), then for each point ``n`` (1, 1 + stride, ...) copies the
template back to the same paths and runs the operation in a child that SIGKILLs
itself just before its nth call:

* ``checkpoint``: two checkpoints, then one more turn of writes; the killed checkpoint
  is the third. A new container must restore exactly the second or the third; the
  container's next checkpoint must succeed, ``verify --full`` be clean, and another new
  container restore exactly the third.
* ``gc``: five checkpoints and a gc (``--keep-last 2``) between the fourth and the
  fifth, so the killed gc (``--keep-last 2 --grace 0``) both sweeps ripe tombstones
  and marks. A new container restores the newest exactly; every manifest still in the
  store exports whole and exactly; after the next checkpoint ``verify --full`` is clean.
* ``restore``: a new container restores two checkpoints' store. Whatever the killed
  restore left at a live path is whole; the container's checkpoint refuses (or, if the
  restore had finished, is idle); a second restore completes exactly.

Calls made by several threads (pack uploads, restore's writers) are counted as they
come, so the call a point names can differ between runs of a multi-threaded step; the
checks hold whichever it is.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .afterwards import after_killed_restore, failed, manifests_restore_whole, restore_new, verify_clean
from .checks import KILLED, OK, Version, differences, judge
from .procs import run_forked
from .world import Agent, Container

OPERATIONS = ("checkpoint", "gc", "restore")


@dataclass
class SweepResult:
    operation: str
    store: str
    calls: int = 0            # the operation's file-system calls, counted unkilled
    points: int = 0           # kill points tried
    kills: int = 0            # points where the kill landed (the rest finished first)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"sweep {self.operation} ({self.store} store): {self.calls} file-system calls, {self.points} kill "
                f"points, {self.kills} kills landed, {len(self.problems)} violations")


class Sweep:
    """One operation's sweep under ``workdir`` (see the module docstring)."""

    def __init__(self, workdir: str | Path, operation: str, store: str = "local", seed: int = 0):
        if operation not in OPERATIONS:
            raise ValueError(f"sweep: unknown operation {operation!r} (one of {', '.join(OPERATIONS)})")
        if store not in ("local", "hfsim"):
            raise ValueError(f"sweep: the {store} store cannot be copied point by point; sweep local or hfsim")
        self.workdir = Path(workdir)
        self.template = self.workdir / "template"
        self.work = self.workdir / "work"
        self.operation = operation
        self.store = store
        self.seed = seed
        self.versions: list[Version] = []
        self.final: dict = {}

    def url(self, root: Path) -> str:
        return f"hfsim://{root / 'store'}" if self.store == "hfsim" else str(root / "store")

    def build(self) -> None:
        """Make the template: the scenario up to the operation, writers stopped."""
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        root = self.template
        a = Container(root / "a", self.url(root))
        agent = Agent(a, self.seed)
        rng = random.Random(self.seed)
        checkpoints = 5 if self.operation == "gc" else 2
        for i in range(checkpoints):
            agent.step(appends=rng.randint(1, 5), tear=True, commits=2)
            if self.operation == "gc" and i == checkpoints - 1:
                self._must(run_forked(a.gc(keep_last=2)), "the template's gc")
            trees = a.describe(agent.dbs)
            out = self._must(run_forked(a.checkpoint()), f"the template's checkpoint {i + 1}")
            self.versions.append(Version(f"checkpoint {i + 1}", trees, OK, out.value["seq"]))
        if self.operation == "checkpoint":
            agent.step(appends=3, tear=True, commits=2)
        agent.close()  # the writer stops: transcripts get their torn lines' ends, databases close
        self.final = a.describe()  # what the next checkpoint of the writing container publishes
        if self.operation == "checkpoint":
            self.versions.append(Version("the killed checkpoint", self.final, KILLED))

    @staticmethod
    def _must(out, what: str):
        problem = failed(out, what)
        if problem:
            raise RuntimeError(f"sweep: {problem}")
        return out

    def reset(self) -> tuple[Container, Container]:
        """The template copied to the work paths; (the writing container, a new one)."""
        if self.work.exists():
            shutil.rmtree(self.work)
        shutil.copytree(self.template, self.work, symlinks=True)
        url = self.url(self.work)
        return Container(self.work / "a", url), Container(self.work / "b", url)

    def _operation(self, a: Container, b: Container):
        if self.operation == "checkpoint":
            return a.checkpoint()
        if self.operation == "gc":
            return a.gc(keep_last=2, grace=0.0)
        return b.restore()

    def run(self, stride: int = 1, limit: int | None = None) -> SweepResult:
        """Count the calls, then kill at every ``stride``-th one (at most ``limit`` points,
        spread over the whole operation)."""
        self.build()
        result = SweepResult(self.operation, self.store)
        a, b = self.reset()
        counted = self._must(run_forked(self._operation(a, b), count=True), f"the counted {self.operation}")
        result.calls = counted.calls
        points = list(range(1, counted.calls + 1, max(stride, 1)))
        if limit is not None and len(points) > limit:
            points = [points[round(i * (len(points) - 1) / (limit - 1))] for i in range(limit)] if limit > 1 \
                else points[:1]
        for n in points:
            a, b = self.reset()
            out = run_forked(self._operation(a, b), kill_at=n)
            result.points += 1
            result.kills += out.status == "killed"
            if out.status not in (OK, "killed"):
                result.problems.append(f"point {n}: {failed(out, self.operation)}")
                continue
            result.problems += [f"point {n}: {p}" for p in self._check(a, b, finished=out.ok)]
        shutil.rmtree(self.work, ignore_errors=True)
        return result

    def _check(self, a: Container, b: Container, finished: bool) -> list[str]:
        url = self.url(self.work)
        if self.operation == "restore":
            return after_killed_restore(b, self.versions[-1].trees, finished) + verify_clean(a)
        problems = []
        restored, found, _ = restore_new(self.work, url, "c")
        problems += found
        if restored is not None:
            if self.operation == "checkpoint":
                problems += judge(restored, self.versions)
            elif restored != self.versions[-1].trees:
                problems.append("a new container does not restore the newest checkpoint: "
                                + "; ".join(differences(restored, self.versions[-1].trees)))
        if self.operation == "gc":
            seqs = run_forked(a.seqs())
            if seqs.ok:
                problems += manifests_restore_whole(self.work, url, {v.seq: v.trees for v in self.versions},
                                                    seqs.value)
        out = run_forked(a.checkpoint())
        problem = failed(out, "the next checkpoint")
        if problem:
            return problems + [problem]
        problems += verify_clean(a)
        restored, found, _ = restore_new(self.work, url, "d")
        problems += found
        if restored is not None and restored != self.final:
            problems.append("after the next checkpoint a new container does not restore it: "
                            + "; ".join(differences(restored, self.final)))
        return problems
