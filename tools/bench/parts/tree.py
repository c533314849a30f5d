"""The tree part: a 20,000-file tree (``--tree-files``), an idle tick and a one-change
tick, journal against the legacy design."""

from __future__ import annotations

import os
import random
import time

from ..measure import KIB, MIB, log, rmtree, rotate, settle, tree_stats
from ..report import fmt_bytes, fmt_s, med, med_fig, ratio
from ..systems import JournalSys, LegacySys, SupervisedJournal
from ..workload import BASE_TIME, Lines, dump_line, generate_tree, stamp, text_for
from .base import Part


NAMES = ("journal", "journal-supervise", "legacy")


class TreePart(Part):
    name = "tree"

    def run(self, args, tools, work: str) -> dict:
        rd = os.path.join(work, "tree")
        rmtree(rd)
        local = os.path.join(rd, "local")
        t0 = time.perf_counter()
        jsonl = generate_tree(os.path.join(local, "agent-state/claude"), args.seed, args.tree_files)
        files, size = tree_stats(local)
        log(f"tree: generated {files} files, {size / MIB:.1f} MiB in {time.perf_counter() - t0:.1f}s")
        journal = JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home"))
        legacy = LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                           ["agent-state/claude"], [])
        supervise = SupervisedJournal(tools, local, os.path.join(rd, "store-supervise"),
                                      os.path.join(rd, "home-supervise"), state_dir=os.path.join(rd, "state-supervise"))
        systems = [journal, supervise, legacy]
        out: dict = {"files": files, "bytes": size, "initial": {}, "runs": []}
        for s in systems:
            out["initial"][s.name] = s.tick()
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
            log_run(run, r, args.runs)
        rmtree(rd)
        return out

    def summarize(self, tree: dict, spread: dict) -> dict:
        st = {"files": tree["files"], "bytes": tree["bytes"]}
        for name in NAMES:
            st[name] = {"initial": tree["initial"][name],
                        "idle": med_fig([r[name]["idle"] for r in tree["runs"]]),
                        "change": med_fig([r[name]["change"] for r in tree["runs"]])}
        st["journal"]["idle_in_process_s"] = med(r["journal"].get("idle_in_process_s") for r in tree["runs"])
        for part in ("idle", "change"):
            for k in ("wall_s", "cpu_s", "bytes"):
                for name, who in (("journal", "journal"), ("journal-supervise", "supervise")):
                    spread[f"tree_{part}_{k.split('_')[0]}_{who}_over_legacy"] = [
                        ratio(r[name][part][k], r["legacy"][part][k]) for r in tree["runs"]]
        return st

    def targets(self, tree: dict, ratios: dict, res: dict, verdicts) -> None:
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

    def tables(self, tree: dict, res: dict) -> list[str]:
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


def log_run(run: dict, r: int, runs: int) -> None:
    j, g = run["journal"], run["legacy"]
    log(f"tree run {r + 1}/{runs}: idle journal {j['idle']['wall_s'] * 1000:.0f} ms, "
        f"legacy {g['idle']['wall_s'] * 1000:.0f} ms; one change journal "
        f"{j['change']['wall_s'] * 1000:.0f} ms / {j['change']['bytes'] / KIB:.1f} KiB, "
        f"legacy {g['change']['wall_s'] * 1000:.0f} ms / {g['change']['bytes'] / KIB:.1f} KiB")
