"""The checks that follow a kill or a fault, shared by the trials and the kill sweeps.

Each runs journal operations in forked children (``procs.run_forked``) and returns
what it found wrong, one line each (an empty list: nothing).
"""

from __future__ import annotations

from pathlib import Path

from .checks import Trees, differences, judge_partial
from .procs import Outcome, run_forked
from .world import TREES, Container, describe_tree

#: A checkpoint refuses a container whose restore was killed: with a state that lacks
#: the restore-complete marker, or with no state at all when it died before saving one.
REFUSALS = ("RestoreNotComplete", "HistoryWithoutState")


def failed(out: Outcome, what: str) -> str | None:
    """One line saying how ``out`` went wrong, or None when it ended ok."""
    if out.ok:
        return None
    detail = out.message.strip().splitlines()[-1] if out.message else ""
    return f"{what} ended {out.status}" + (f" ({out.error}: {detail})" if out.error else "")


def restore_new(base: Path, url: str, name: str) -> tuple[Trees | None, list[str], Outcome]:
    """A new container ``base/name`` restores the newest checkpoint; it must be complete
    and no fallback. Returns its trees (None when the restore failed), problems, outcome."""
    c = Container(base / name, url)
    out = run_forked(c.restore())
    problem = failed(out, f"the restore of new container {name}")
    if problem:
        return None, [problem], out
    v = out.value
    problems = [] if v["complete"] and not v["fallback"] else [
        f"new container {name}: restore not clean: complete={v['complete']} fallback={v['fallback']} "
        f"lost={v['lost'][:3]}"]
    return c.describe(), problems, out


def after_killed_restore(b: Container, want: Trees, finished: bool) -> list[str]:
    """Container ``b``'s restore of ``want`` was killed (``finished``: it ended first).
    What it left at live paths is whole; its checkpoint refuses unless the restore
    finished, and never publishes a partial tree; a second restore completes it, and
    the checkpoint after that succeeds. (That checkpoint need not be idle: a database
    the first restore put in place is a valid local database to the second, which
    keeps it as authoritative, and the checkpoint snapshots it again.)"""
    problems = judge_partial(b.describe(), want)
    check = run_forked(b.checkpoint())
    if check.ok:
        now = b.describe()
        if now != want:
            problems.append("a checkpoint after a killed restore ran on a partial tree: "
                            + "; ".join(differences(now, want)))
    elif check.error not in REFUSALS:
        problems.append(failed(check, "the checkpoint after a killed restore"))
    elif finished:
        problems.append("a restore that completed left its container refusing to checkpoint")
    again = run_forked(b.restore())
    problem = failed(again, "the restore after a killed restore")
    if problem:
        return problems + [problem]
    if not again.value["complete"]:
        problems.append(f"the restore after a killed restore is incomplete: {again.value['lost'][:3]}")
    now = b.describe()
    if now != want:
        problems.append("the restore after a killed restore: " + "; ".join(differences(now, want)))
    problem = failed(run_forked(b.checkpoint()), "the checkpoint after the second restore")
    return problems + [problem] if problem else problems


def manifests_restore_whole(base: Path, url: str, by_seq: dict[int, Trees], seqs: list[int]) -> list[str]:
    """Each of ``seqs`` (manifests still in the store after a gc) exports whole
    (``restore --at SEQ --to DIR``), exactly as ``by_seq`` says it was checkpointed."""
    problems = []
    for seq in seqs:
        if seq not in by_seq:
            continue
        to = base / f"export-{seq}"
        out = run_forked(Container(base / f"x{seq}", url).restore(at=str(seq), to=str(to)))
        problem = failed(out, f"restore --at {seq} --to after a gc")
        if problem:
            problems.append(problem)
            continue
        if not out.value["complete"] or out.value["fallback"]:
            problems.append(f"checkpoint {seq}, still in the store after a gc, does not restore whole: "
                            f"lost={out.value['lost'][:3]} fallback={out.value['fallback']}")
        got = {name: describe_tree(to / name) for name in TREES if (to / name).is_dir()}
        if got != by_seq[seq]:
            problems.append(f"restore --at {seq} after a gc: " + "; ".join(differences(got, by_seq[seq])))
    return problems


def verify_clean(a: Container) -> list[str]:
    """``verify --full`` reports no error (warnings, such as unreferenced packs a killed
    checkpoint left, are allowed)."""
    out = run_forked(a.verify())
    problem = failed(out, "verify --full")
    if problem:
        return [problem]
    return [f"verify --full: {out.value['errors'][:3]}"] if out.value["errors"] else []
