"""Torture trials: a random agent workload, one fault, then the invariants.

Each trial (its own store, containers and ``random.Random(f"{seed}:{trial}")``):

1. an agent writes the trees for one to three rounds, each followed by a checkpoint
   (sometimes a gc with grace 0, so later gcs have ripe tombstones to sweep);
2. one *action*:

   * ``kill-checkpoint``, ``kill-gc`` (grace 0), ``kill-restore`` (a new container's):
     SIGKILL at a random instant across the operation's duration, measured on an
     earlier run of it in the same trial;
   * ``kill-writer``: the agent writes without pause while checkpoints run beside it,
     and is SIGKILLed at a random instant;
   * ``fault``: a checkpoint or a gc meets a store fault (``faults``: ENOSPC or EIO at
     the Nth write, EIO at the Nth fsync, a short write, a put refused, a put that
     fails after its bytes landed); it must succeed or fail with a ``JournalError``;
   * ``supervise``: ``journal supervise`` runs a writer and is SIGKILLed (with its
     writer) at a random instant: nothing older than its interval may be lost;
3. a new container restores, and the restore is judged (``checks``); the writing
   container checkpoints again; ``verify --full`` must find no error; another new
   container restores exactly that last checkpoint.

Every way a trial can go wrong is a ``Violation`` naming the seed and the trial, so
``tools/torture.py --seed S --trial N`` replays it (the instants of kills are drawn
from the same generator, but scaled by durations measured on this machine now).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .afterwards import after_killed_restore, failed, manifests_restore_whole, restore_new, verify_clean
from .checks import FAILED, KILLED, OK, Floors, Trees, Version, differences, judge, judge_concurrent, unprintable
from .faults import FS_FAULTS, PUT_FAULTS
from .procs import CRASH, ERROR, Outcome, run_forked
from .world import TRANSCRIPTS, Agent, Container, complete_prefix

#: How often each action is drawn.
ACTIONS = {"kill-checkpoint": 4, "kill-gc": 2, "kill-restore": 2, "kill-writer": 2, "fault": 4, "supervise": 0.4}
STORES = ("local", "hfsim", "s3")


@dataclass
class Violation:
    seed: int
    trial: int
    store: str
    action: str
    detail: str

    def line(self) -> str:
        return (f"VIOLATION trial {self.trial} ({self.action}, {self.store} store): {self.detail} "
                f"[replay: tools/torture.py --store {self.store} --seed {self.seed} --trial {self.trial}]")


@dataclass
class Tally:
    """What a run tried and found."""

    store: str
    trials: int = 0
    kills: int = 0           # SIGKILLs that landed while the operation ran
    kills_late: int = 0      # drawn instants the operation had already finished by
    faults: int = 0          # injected faults that were hit
    faults_missed: int = 0   # faults whose Nth call never came
    actions: Counter = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)

    def line(self) -> str:
        return (f"torture: {self.trials} trials on the {self.store} store, {self.kills} kills "
                f"({self.kills_late} more came after the operation finished), {self.faults} faults "
                f"({self.faults_missed} more never reached), {len(self.violations)} violations")


class S3Endpoint:
    """moto's S3 server in a child process (so this process starts no threads), with
    one bucket; trials use a prefix each."""

    def __init__(self, workdir: Path):
        import socket
        import subprocess

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_REGION": "us-east-1", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        os.environ.update(env)  # the forked operations' CloudStore reads them from here
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=(workdir / "moto.log").open("wb"))
        self.bucket = "torture"
        self.endpoint = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("torture: moto's S3 server did not start; see moto.log") from None
                time.sleep(0.1)
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/{self.bucket}", method="PUT")).close()

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}?endpoint={self.endpoint}&allow_http=true&region=us-east-1"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class Torture:
    """Runs trials on one kind of store (``local``, ``hfsim``: hf-mount's rules, ``s3``:
    moto) under ``workdir``; a trial's directory is removed unless it found a violation."""

    def __init__(self, workdir: str | Path, store: str = "local", seed: int = 0,
                 actions: dict[str, float] | None = None):
        if store not in STORES:
            raise ValueError(f"torture: unknown store {store!r} (one of {', '.join(STORES)})")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.store = store
        self.seed = seed
        self.actions = actions or ACTIONS
        self.s3 = S3Endpoint(self.workdir) if store == "s3" else None
        self.tally = Tally(store)

    def url(self, base: Path, trial: int) -> str:
        if self.store == "s3":
            return self.s3.url(f"seed{self.seed}-trial{trial}")
        return f"hfsim://{base / 'store'}" if self.store == "hfsim" else str(base / "store")

    def run(self, trials: int | range, progress=None) -> Tally:
        for index in range(trials) if isinstance(trials, int) else trials:
            self.trial(index)
            if progress is not None:
                progress(self.tally)
        return self.tally

    def trial(self, index: int) -> list[Violation]:
        base = self.workdir / f"trial-{index}"
        if base.exists():
            shutil.rmtree(base)
        run = _Trial(self, index, base)
        try:
            run.run()
        except Exception as err:  # the suite's own failure is reported, never hidden
            run.violation(f"the trial itself failed: {type(err).__name__}: {err}")
        finally:
            run.stop_agent()
        self.tally.trials += 1
        self.tally.actions[run.action] += 1
        self.tally.violations += run.violations
        if not run.violations:
            shutil.rmtree(base, ignore_errors=True)
        return run.violations

    def close(self) -> None:
        if self.s3 is not None:
            self.s3.close()


class _Trial:
    def __init__(self, torture: Torture, index: int, base: Path):
        self.t = torture
        self.index = index
        self.base = base
        self.rng = random.Random(f"{torture.seed}:{index}")
        names, weights = zip(*torture.actions.items())
        self.action = self.rng.choices(names, weights)[0]
        self.url = torture.url(base, index)
        self.a = Container(base / "a", self.url)
        self.agent: Agent | None = None
        self.versions: list[Version] = []
        self.violations: list[Violation] = []
        self.durations: dict[str, float] = {}
        self.exact = True   # False once a writer ran beside a checkpoint: no exact version is known

    # --- plumbing

    def violation(self, detail: str) -> None:
        self.violations.append(Violation(self.t.seed, self.index, self.t.store, self.action, detail))

    def stop_agent(self) -> None:
        if self.agent is not None:
            try:
                self.agent.close()
            except (OSError, EOFError):
                pass
            self.agent = None

    def expect_ok(self, out: Outcome, what: str) -> bool:
        problem = failed(out, what)
        if problem:
            self.violation(problem)
        return problem is None

    def problems(self, found: list[str], prefix: str = "") -> None:
        for problem in found:
            self.violation(prefix + problem)

    def live(self) -> Trees:
        """A's trees now (its databases from the agent's counters while it lives)."""
        return self.a.describe(self.agent.dbs if self.agent is not None else None)

    def checkpoint(self, label: str, *, fault: str | None = None, kill_after: float | None = None) -> Outcome:
        trees = self.live()
        out = run_forked(self.a.checkpoint(fault), kill_after=kill_after)
        if out.status == CRASH:
            self.violation(f"{label}: an untyped failure: {out.message.strip().splitlines()[-1]}")
        status = OK if out.ok else KILLED if out.status == "killed" else FAILED
        if out.ok and kill_after is None and fault is None:
            self.durations["checkpoint"] = out.seconds
        if out.ok:
            self.problems(unprintable(out.value["warnings"]), f"{label}: ")
        self.versions.append(Version(label, trees, status, out.value["seq"] if out.ok else None))
        return out

    def kill_instant(self, op: str) -> float:
        return self.rng.uniform(0, self.durations[op])

    def count_kill(self, out: Outcome) -> None:
        if out.status == "killed":
            self.t.tally.kills += 1
        else:
            self.t.tally.kills_late += 1

    def fresh(self, name: str) -> Trees | None:
        """A new container restores the newest checkpoint; its trees (None when it failed)."""
        trees, problems, out = restore_new(self.base, self.url, name)
        self.problems(problems)
        if out.ok:
            self.problems(unprintable(out.value["warnings"]), f"the restore of new container {name}: ")
            self.durations["restore"] = out.seconds
        return trees

    def step(self) -> None:
        rng = self.rng
        self.agent.step(appends=rng.randint(1, 6), tear=rng.random() < 0.6, commits=rng.randint(0, 3))

    # --- the trial

    def run(self) -> None:
        rng = self.rng
        self.agent = Agent(self.a, rng.randrange(1 << 32))
        if self.action == "supervise":
            self.supervise()
            return
        for r in range(rng.randint(1, 3)):
            self.step()
            self.expect_ok(self.checkpoint(f"round {r}"), f"checkpoint of round {r}")
        if self.action == "kill-gc" or rng.random() < 0.15:
            out = run_forked(self.a.gc(keep_last=2))
            if self.expect_ok(out, "a gc"):
                self.durations["gc"] = out.seconds
            self.step()
            self.expect_ok(self.checkpoint("after gc"), "the checkpoint after a gc")
        getattr(self, self.action.replace("-", "_"))()
        self.finish()

    def finish(self) -> None:
        if self.exact:
            restored = self.fresh("c")
            if restored is not None:
                self.problems(judge(restored, self.versions), "new container c: ")
        if not self.expect_ok(self.checkpoint("the next checkpoint"), "the next checkpoint"):
            return
        self.problems(verify_clean(self.a), "after the next checkpoint: ")
        restored = self.fresh("d")
        if restored is not None and restored != self.versions[-1].trees:
            self.violation("new container d does not restore the last checkpoint: "
                           + "; ".join(differences(restored, self.versions[-1].trees)))

    # --- actions

    def kill_checkpoint(self) -> None:
        self.step()
        self.count_kill(self.checkpoint("killed checkpoint", kill_after=self.kill_instant("checkpoint")))

    def kill_gc(self) -> None:
        out = run_forked(self.a.gc(keep_last=self.rng.randint(1, 3)), kill_after=self.kill_instant("gc"))
        self.count_kill(out)
        if out.status not in (OK, "killed"):
            self.expect_ok(out, "a gc")
        # Every manifest still in the store restores whole: gc deletes a manifest before
        # what it needs, and nothing a manifest left in the store needs.
        seqs = run_forked(self.a.seqs())
        if self.expect_ok(seqs, "listing the manifests"):
            by_seq = {v.seq: v.trees for v in self.versions if v.seq is not None}
            sample = self.rng.sample(seqs.value, min(2, len(seqs.value)))
            self.problems(manifests_restore_whole(self.base, self.url, by_seq, sample))

    def kill_restore(self) -> None:
        want = self.versions[-1].trees
        if self.fresh("s") is None:  # measures the restore
            return
        b = Container(self.base / "b", self.url)
        out = run_forked(b.restore(), kill_after=self.kill_instant("restore"))
        self.count_kill(out)
        self.problems(after_killed_restore(b, want, finished=out.ok))
        # The restored container carries on (it may have committed since): its agent
        # starts on what the restore left, as a restarted container's would.
        self.stop_agent()
        self.a = b
        self.agent = Agent(b, self.rng.randrange(1 << 32))

    def kill_writer(self) -> None:
        rng = self.rng
        self.agent.burst()
        self.exact = False
        floors = None
        for _ in range(rng.randint(1, 2)):
            measured = Floors(
                transcripts={f"agent/{rel}": len(complete_prefix((self.a.tree("agent") / rel).read_bytes()))
                             for rel in TRANSCRIPTS},
                dbs={f"agent/{name}": c for name, c in self.agent.progress().items()})
            if self.expect_ok(run_forked(self.a.checkpoint()), "a checkpoint beside a running writer"):
                floors = measured
        time.sleep(rng.uniform(0, 0.1))
        self.agent.kill()
        self.agent = None
        self.t.tally.kills += 1
        live = self.live()
        live_bytes = {f"agent/{rel}": (self.a.tree("agent") / rel).read_bytes() for rel in TRANSCRIPTS}
        restored = self.fresh("c")
        if restored is not None and floors is not None:
            for problem in judge_concurrent(restored, floors, live, live_bytes):
                self.violation(f"new container c: {problem}")

    def fault(self) -> None:
        rng = self.rng
        kinds = (FS_FAULTS if self.t.store != "s3" else ()) + PUT_FAULTS
        kind = rng.choice(kinds)
        spec = f"{kind}@{rng.randint(1, 3)}"
        self.step()
        if rng.random() < 0.75:
            out = self.checkpoint(f"checkpoint with {spec}", fault=spec)
        else:
            out = run_forked(self.a.gc(keep_last=rng.randint(1, 3), fault=spec))
            if out.status == CRASH:
                self.violation(f"gc with {spec}: an untyped failure: {out.message.strip().splitlines()[-1]}")
        hit = out.value["fired"] if out.ok else out.extra.get("fired", out.status == ERROR)
        if hit:
            self.t.tally.faults += 1
        else:
            self.t.tally.faults_missed += 1
        if out.ok and hit and kind in ("enospc", "eio", "eio-fsync", "put"):
            self.violation(f"{spec}: a failed store write was reported as success")

    def supervise(self) -> None:
        from .supervised import run_supervised

        self.stop_agent()
        self.exact = False
        problems, killed = run_supervised(self.a, self.rng, self.base)
        if killed:
            self.t.tally.kills += 1
        for problem in problems:
            self.violation(problem)
