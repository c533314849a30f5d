"""The tree part: trees of many small files, in directories of 500 (``--tree-files``:
20,000 and 200,000 files by default, 1,000,000 when asked for), each with journal's
first checkpoint, idle and one-change ticks (against the legacy design, and as `journal
supervise` runs them, its inotify watch armed), and a full restore against restic's, every figure with the
command's peak RSS (``wait4``: the spawner's children)."""

from __future__ import annotations

import os
import random
import time

from ..measure import KIB, MIB, flush_disk, log, rmtree, rotate, settle, tree_stats
from ..report import fmt_bytes, fmt_s, med, med_fig, ratio
from ..systems import JournalSys, LegacySys, ResticSys, SupervisedJournal
from ..workload import BASE_TIME, Lines, dump_line, generate_tree, stamp, text_for
from .base import Part


NAMES = ("journal", "journal-supervise", "legacy")
#: Issue 46's targets are judged at this many files (or the largest size run below it).
GOAL_FILES = 200_000
GOAL_RSS_MIB = 150      # peak RSS of the first checkpoint, a one-change tick and a restore
GOAL_IDLE_S = 0.1
GOAL_CHANGE_S = 0.3


class TreePart(Part):
    name = "tree"

    def run(self, args, tools, work: str) -> dict:
        return {"sizes": [self._size(args, tools, work, n) for n in args.tree_files]}

    def _size(self, args, tools, work: str, nfiles: int) -> dict:
        """One tree of ``nfiles`` files: every system's first checkpoint, ``--runs`` idle
        and one-change ticks, then ``--tree-restores`` restores by journal and restic,
        interleaved, each from a cold page cache (``flush_disk``)."""
        rd = os.path.join(work, "tree")
        rmtree(rd)
        local = os.path.join(rd, "local")
        t0 = time.perf_counter()
        jsonl = generate_tree(os.path.join(local, "agent-state/claude"), args.seed, nfiles)
        files, size = tree_stats(local)
        log(f"tree: generated {files:,} files, {size / MIB:.1f} MiB in {time.perf_counter() - t0:.1f}s")
        journal = JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home"))
        legacy = LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                           ["agent-state/claude"], [])
        supervise = SupervisedJournal(tools, local, os.path.join(rd, "store-supervise"),
                                      os.path.join(rd, "home-supervise"), state_dir=os.path.join(rd, "state-supervise"))
        restic = ResticSys(tools, os.path.join(rd, "restic-repo"), os.path.join(rd, "restic-cache"),
                           [os.path.join(local, "agent-state/claude")]) if tools.restic else None
        systems = [journal, supervise, legacy]
        dirs = sum(1 for _, _, names in os.walk(local) if names)   # directories holding files
        out: dict = {"files": files, "bytes": size, "dirs": dirs, "initial": {}, "runs": [], "restores": []}
        for s in systems + ([restic] if restic else []):
            out["initial"][s.name] = s.tick()
        supervise.settle()
        lines = Lines(text_for(args.seed))
        for r in range(args.runs):
            run: dict = {s.name: {} for s in systems}
            settle()
            for s in rotate(systems, r):
                run[s.name]["idle"] = s.tick()
            run["journal"]["idle_in_process_s"] = journal.in_process_idle()
            settle()
            rng = random.Random(f"{args.seed}:tree-change:{r}")
            rel = jsonl[rng.randrange(len(jsonl))]
            with open(os.path.join(local, "agent-state/claude", rel), "ab") as fh:
                fh.write(dump_line(lines.claude(rng, stamp(BASE_TIME, 10 ** 6 + r), "x", None, "/home/node/work")))
            settle()
            for s in rotate(systems, r + 1):
                run[s.name]["change"] = s.tick()
            out["runs"].append(run)
            log_run(run, r, args.runs, files)
        for r in range(args.tree_restores):
            out["restores"].append(self._restores([journal] + ([restic] if restic else []), rd, r, files))
        rmtree(rd)
        return out

    @staticmethod
    def _restores(systems: list, rd: str, r: int, files: int) -> dict:
        run = {}
        for s in rotate(systems, r):
            dest = os.path.join(rd, f"restore-{s.name}")
            flush_disk()
            run[s.name] = s.restore(dest)
            rmtree(dest)
        log(f"tree {files:,} restore {r + 1}: " + ", ".join(
            f"{name} {fig['wall_s']:.2f}s ({fig['maxrss_kib'] / KIB:.0f} MiB)" for name, fig in run.items()))
        return run

    def summarize(self, tree: dict, spread: dict) -> dict:
        sizes = [summarize_size(one, spread, first=i == 0) for i, one in enumerate(tree["sizes"])]
        return {"sizes": sizes}

    def targets(self, tree: dict, ratios: dict, res: dict, verdicts) -> None:
        sizes = tree["sizes"]
        legacy_targets(sizes[0], ratios, verdicts)
        at = max((s for s in sizes if s["files"] <= GOAL_FILES), key=lambda s: s["files"], default=sizes[0])
        goal_targets(at, ratios, verdicts)

    def tables(self, tree: dict, res: dict) -> list[str]:
        out = growth_table(tree["sizes"])
        for one in tree["sizes"]:
            out += legacy_table(one)
        return out


def summarize_size(one: dict, spread: dict, first: bool) -> dict:
    """One size's medians; its per-run ratios go to ``spread`` (the first size's under
    the names earlier runs used, ``tree_<part>_...``; restore against restic under
    ``tree_<files>_restore_...`` for every size)."""
    runs, n = one["runs"], one["files"]
    st = {"files": n, "bytes": one["bytes"], "dirs": one.get("dirs")}
    for name in NAMES:
        st[name] = {"initial": one["initial"][name],
                    "idle": med_fig([r[name]["idle"] for r in runs]),
                    "change": med_fig([r[name]["change"] for r in runs])}
    st["journal"]["idle_in_process_s"] = med(r["journal"].get("idle_in_process_s") for r in runs)
    restores = one.get("restores", [])
    st["journal"]["restore"] = med_fig([r.get("journal") for r in restores])
    st["restic"] = None if "restic" not in one["initial"] else {
        "initial": one["initial"]["restic"], "restore": med_fig([r.get("restic") for r in restores])}
    spread[f"tree_{n}_restore_wall_journal_over_restic"] = [
        ratio(r["journal"]["wall_s"], r["restic"]["wall_s"]) if "restic" in r else None for r in restores]
    spread[f"tree_{n}_restore_cpu_journal_over_restic"] = [
        ratio(r["journal"]["cpu_s"], r["restic"]["cpu_s"]) if "restic" in r else None for r in restores]
    if first:
        for part in ("idle", "change"):
            for k in ("wall_s", "cpu_s", "bytes"):
                for name, who in (("journal", "journal"), ("journal-supervise", "supervise")):
                    spread[f"tree_{part}_{k.split('_')[0]}_{who}_over_legacy"] = [
                        ratio(r[name][part][k], r["legacy"][part][k]) for r in runs]
    return st


def legacy_targets(tree: dict, ratios: dict, verdicts) -> None:
    """Issue 27's: journal's ticks against the legacy design's, at the first size."""
    tw = ratios["tree_idle_wall_journal_over_legacy"]
    verdicts.add(f"a {tree['files']:,}-file idle tick: wall <= legacy", tw is not None and tw <= 1.0,
                 f"journal {tree['journal']['idle']['wall_s'] * 1000:.0f} ms vs legacy "
                 f"{tree['legacy']['idle']['wall_s'] * 1000:.0f} ms = {tw:.2f}x")
    for name, key, label in (("journal", "tree_change_wall_journal_over_legacy", "the command line"),
                             ("journal-supervise", "tree_change_wall_supervise_over_legacy",
                              "as `journal supervise` runs it")):
        cw = ratios[key]
        if cw is not None:
            verdicts.add(f"a {tree['files']:,}-file one-change tick, {label}: wall <= 1.5x legacy", cw <= 1.5,
                         f"journal {tree[name]['change']['wall_s'] * 1000:.0f} ms vs legacy "
                         f"{tree['legacy']['change']['wall_s'] * 1000:.0f} ms = {cw:.2f}x")
    inproc = tree["journal"].get("idle_in_process_s")
    if inproc is not None:
        verdicts.add(f"a {tree['files']:,}-file idle tick as `journal supervise` runs it: wall <= legacy",
                     inproc <= tree["legacy"]["idle"]["wall_s"],
                     f"journal {inproc * 1000:.0f} ms vs legacy {tree['legacy']['idle']['wall_s'] * 1000:.0f} ms")


def goal_targets(tree: dict, ratios: dict, verdicts) -> None:
    """Issue 46's, at one size: peak RSS, the ticks' walls, restore against restic."""
    j, n = tree["journal"], tree["files"]
    peaks = {"first checkpoint": j["initial"]["maxrss_kib"], "one-change tick": j["change"]["maxrss_kib"],
             "restore --to": (j["restore"] or {}).get("maxrss_kib")}
    known = [v for v in peaks.values() if v is not None]
    verdicts.add(f"a {n:,}-file tree: peak RSS <= {GOAL_RSS_MIB} MiB (first checkpoint, one-change tick, restore)",
                 len(known) == len(peaks) and max(known) <= GOAL_RSS_MIB * KIB,
                 ", ".join(f"{what} {v / KIB:.0f} MiB" for what, v in peaks.items() if v is not None))
    # The ticks as `journal supervise` runs them (its watch armed: design §10, "The watch"),
    # with the command line's beside: a fresh process lstat()s every path.
    for what, key, limit in (("idle", "idle", GOAL_IDLE_S), ("one-change", "change", GOAL_CHANGE_S)):
        fig, cli = tree["journal-supervise"][key], j[key]
        verdicts.add(f"a {n:,}-file {what} tick as `journal supervise` runs it: wall <= {fmt_s(limit)}",
                     fig["wall_s"] <= limit, f"{fmt_s(fig['wall_s'])} (CPU {fmt_s(fig['cpu_s'])}); the command "
                                             f"line {fmt_s(cli['wall_s'])} (CPU {fmt_s(cli['cpu_s'])})")
    rr = ratios.get(f"tree_{n}_restore_wall_journal_over_restic")
    name = f"a {n:,}-file restore --to: wall <= restic restore"
    if tree["restic"] is None or rr is None:
        verdicts.add(name, None, "restic is not installed: not compared (--install-baselines)")
        return
    verdicts.add(name, rr <= 1.0, f"journal {fmt_s(j['restore']['wall_s'])} vs restic "
                                  f"{fmt_s(tree['restic']['restore']['wall_s'])} = {rr:.2f}x")


def _fig(fig: dict | None, rss: bool = False) -> str:
    if not fig:
        return "n/a"
    return f"{fmt_s(fig['wall_s'])} / {fmt_s(fig['cpu_s'])}" + (f" / {fig['maxrss_kib'] / KIB:.0f} MiB" if rss else "")


def growth_table(sizes: list[dict]) -> list[str]:
    """journal's figures at every size, restore against restic: how each grows."""
    out = ["| files (dirs) | first checkpoint wall / CPU / RSS | idle tick | one-change tick wall / CPU / RSS | "
           "supervise idle tick | supervise one-change tick | "
           "restore --to wall / CPU / RSS | restic restore | journal / restic |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sizes:
        j, sup, restic = s["journal"], s["journal-supervise"], s["restic"]
        rr = restic and restic["restore"] and j["restore"] and ratio(j["restore"]["wall_s"], restic["restore"]["wall_s"])
        out.append(f"| {s['files']:,} ({s['dirs']:,}) | {_fig(j['initial'], True)} | {_fig(j['idle'])} | "
                   f"{_fig(j['change'], True)} | {_fig(sup['idle'])} | {_fig(sup['change'])} | "
                   f"{_fig(j['restore'], True)} | "
                   f"{_fig(restic['restore'], True) if restic else 'not installed'} | "
                   f"{f'{rr:.2f}x' if rr else 'n/a'} |")
    out.append("")
    return out


def legacy_table(tree: dict) -> list[str]:
    out = [f"| {tree['files']:,}-file tree | system | bytes | objects | wall | CPU |", "|---|---|---:|---:|---:|---:|"]
    for what, key in (("initial checkpoint", "initial"), ("idle tick", "idle"), ("one-change tick", "change")):
        for name in NAMES:
            f = tree[name][key]
            out.append(f"| {what} | {name} | {fmt_bytes(f['bytes'])} | {f['objects']:.0f} | {fmt_s(f['wall_s'])} | "
                       f"{fmt_s(f['cpu_s'])} |")
    out.append("")
    if tree["journal"].get("idle_in_process_s") is not None:
        out.append(f"journal's {tree['files']:,}-file idle tick in-process: "
                   f"{fmt_s(tree['journal']['idle_in_process_s'])}")
        out.append("")
    return out


def log_run(run: dict, r: int, runs: int, files: int) -> None:
    j, g = run["journal"], run["legacy"]
    log(f"tree {files:,} run {r + 1}/{runs}: idle journal {j['idle']['wall_s'] * 1000:.0f} ms, "
        f"legacy {g['idle']['wall_s'] * 1000:.0f} ms; one change journal "
        f"{j['change']['wall_s'] * 1000:.0f} ms / {j['change']['bytes'] / KIB:.1f} KiB "
        f"({j['change']['maxrss_kib'] / KIB:.0f} MiB), "
        f"legacy {g['change']['wall_s'] * 1000:.0f} ms / {g['change']['bytes'] / KIB:.1f} KiB")
