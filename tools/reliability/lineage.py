"""The lineage model as a torture part: ``tests/test_model_lineage.py``'s state machine,
N examples from a seed.

Two or three containers share one local store: fresh starts, hot and stale restarts,
lines and rows written (some by a writer SIGKILLed after its commit), checkpoints
(refused on a stale disk), ``journal checkpoint`` SIGKILLed at a hook or before its
Nth file-system call, ``journal restore`` as a process, rollbacks, takeover, kill -9
of a container, and gc; after every step the oracle checks that no line or row is
lost and that no command reported what it did not do (the module docstring of the
test says what exactly). ``make test`` runs the test's short, derandomized form; ``tools/torture.py
--lineage N`` runs this.

A violation is hypothesis's falsifying example, shrunk: its steps are saved to a file
under the work directory, named on the violation's line with the command that reruns
the seed. The steps, and the ``@reproduce_failure`` line after them, are the replay
(a kill at a counted call can land elsewhere when threads race to it, so a rerun of the
seed may take another path).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

#: Steps per example (the test's long form takes as many).
STEPS = 50


@dataclass
class LineageResult:
    examples: int                     # asked for
    seed: int
    length: int = STEPS               # steps an example takes at most
    runs: int = 0                     # examples run (with a violation, shrinking's too)
    steps: int = 0
    kills: int = 0                    # checkpoint processes a SIGKILL landed on
    refusals: int = 0                 # refused checkpoints (a stale disk)
    stale: int = 0                    # restores of a stale disk
    forks: int = 0                    # forks restores made
    rollbacks: int = 0
    expired: int = 0                  # manifests gc expired
    problems: list[str] = field(default_factory=list)
    saved: list[Path] = field(default_factory=list)   # each problem's steps

    def line(self) -> str:
        return (f"lineage: {self.examples} examples of up to {self.length} steps on 2-3 containers sharing one store "
                f"({self.runs} runs, {self.steps} steps): {self.kills} checkpoints killed, {self.refusals} refused, "
                f"{self.stale} stale restores, {self.forks} forks, {self.rollbacks} rollbacks, {self.expired} "
                f"manifests expired by gc, {len(self.problems)} violations")


def run_lineage(examples: int, seed: int, workdir: str | Path, steps: int | None = None) -> LineageResult:
    """Run ``examples`` examples of the lineage model from ``seed``, of up to ``steps``
    steps (default ``STEPS``); the violations found (hypothesis reports each distinct
    one), their steps saved under ``workdir``. Examples work on tmpfs when there is one
    (journal fsyncs what it publishes), as the test does."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import hypothesis
    from hypothesis import HealthCheck, settings
    from hypothesis.reporting import with_reporter

    import test_model_lineage as model

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    tally = model.Tally()
    machine = type("LineageTorture", (model.LineageModel,), {"tally": tally})
    hypothesis.seed(seed)(machine)
    machine.TestCase.settings = settings(max_examples=examples, stateful_step_count=steps or STEPS, deadline=None,
                                         database=None, print_blob=True, suppress_health_check=list(HealthCheck))
    report: list[str] = []
    result = LineageResult(examples, seed, steps or STEPS)
    try:
        with with_reporter(report.append):
            machine.TestCase().runTest()
    except BaseException as err:  # noqa: BLE001 - every failure is a violation, named
        if isinstance(err, KeyboardInterrupt):
            raise
        found = list(err.exceptions) if isinstance(err, BaseExceptionGroup) else [err]
        for i, exc in enumerate(found):
            saved = workdir / f"lineage-{seed}-{i}.txt"
            notes = "\n".join(getattr(exc, "__notes__", []))
            saved.write_text(f"{type(exc).__name__}: {exc}\n{notes}\n\n" + "\n".join(report) + "\n")
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            result.problems.append(f"{type(exc).__name__}: {first}")
            result.saved.append(saved)
    for name in ("steps", "kills", "refusals", "stale", "forks", "rollbacks", "expired"):
        setattr(result, name, getattr(tally, name))
    result.runs = tally.examples
    return result
