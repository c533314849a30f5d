"""The big part: peak RSS of ``journal checkpoint`` and ``journal restore`` of one 2 GiB
file (``--big-file-mib``), with the legacy design's copy for comparison."""

from __future__ import annotations

import os
import time

from ..measure import KIB, MIB, flush_disk, log, rmtree
from ..report import fmt_s, judge_ratio, med, med_fig, ratio
from ..systems import JournalSys, LegacySys
from ..workload import write_big_file
from .base import Part

BIG_REL = "fx-home/artifacts/model-weights.bin"
#: The peak RSS the checkpoint and the restore of the big file may reach.
RSS_LIMIT_KIB = 100 * KIB


class BigPart(Part):
    name = "big"
    summary_key = "big_file"

    def run(self, args, tools, work: str) -> dict:
        rd = os.path.join(work, "big")
        rmtree(rd)
        local = os.path.join(rd, "local")
        size = args.big_file_mib * MIB
        t0 = time.perf_counter()
        write_big_file(os.path.join(local, BIG_REL), size, args.seed)
        log(f"big: wrote a {size / MIB:.0f} MiB file in {time.perf_counter() - t0:.1f}s")
        out: dict = {"file_bytes": size, "runs": []}
        for r in range(args.big_runs):
            out["runs"].append(self._run(tools, work, rd, local, size))
            log_run(out["runs"][-1], r, args.big_runs)
        rmtree(rd)
        return out

    @staticmethod
    def _run(tools, work: str, rd: str, local: str, size: int) -> dict:
        for sub in ("store", "restore", "legacy-dest", "legacy-state", "restore-rsync"):
            rmtree(os.path.join(rd, sub))
        rmtree(os.path.join(local, ".journal"))
        journal = JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home"))
        legacy = LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                           ["fx-home"], [])
        run = {"journal": {}, "legacy": {}}
        # Each timed command starts with no dirty page of an earlier step: the file was
        # just written, rsync leaves its copy unwritten, and neither is the next one's work.
        flush_disk()
        run["journal"]["checkpoint"] = durable(journal.tick())
        rmtree(os.path.join(rd, "spool"))
        flush_disk()
        run["journal"]["restore"] = durable(journal.restore(os.path.join(rd, "restore")))
        ok = os.path.getsize(os.path.join(rd, "restore/fx/artifacts/model-weights.bin")) == size
        run["journal"]["restore"]["size_ok"] = ok
        rmtree(os.path.join(rd, "restore"))
        rmtree(os.path.join(rd, "store"))
        flush_disk()
        run["legacy"]["checkpoint"] = durable(legacy.tick())
        flush_disk()
        run["legacy"]["restore"] = durable(legacy.restore(os.path.join(rd, "restore-rsync")))
        for sub in ("legacy-dest", "restore-rsync"):
            rmtree(os.path.join(rd, sub))
        return run

    def summarize(self, big: dict, spread: dict) -> dict:
        def fig(system: str, step: str) -> dict:
            figs = [r[system][step] for r in big["runs"]]
            return {**med_fig(figs), "durable_s": med(f["durable_s"] for f in figs)}

        for step in ("checkpoint", "restore"):
            for k in ("wall_s", "durable_s"):
                spread[f"big_{step}_{k.split('_')[0]}_journal_over_legacy"] = [
                    ratio(r["journal"][step][k], r["legacy"][step][k]) for r in big["runs"]]
        return {
            "file_bytes": big["file_bytes"],
            "journal": {"checkpoint": fig("journal", "checkpoint"), "restore": fig("journal", "restore"),
                        "checkpoint_maxrss_kib": max(r["journal"]["checkpoint"]["maxrss_kib"] for r in big["runs"]),
                        "restore_maxrss_kib": max(r["journal"]["restore"]["maxrss_kib"] for r in big["runs"])},
            "legacy": {"checkpoint": fig("legacy", "checkpoint"), "restore": fig("legacy", "restore")}}

    def targets(self, big: dict, ratios: dict, res: dict, verdicts) -> None:
        peak = max(big["journal"]["checkpoint_maxrss_kib"], big["journal"]["restore_maxrss_kib"])
        verdicts.add(f"a {big['file_bytes'] / MIB:.0f} MiB file: peak RSS <= 100 MiB", peak <= RSS_LIMIT_KIB,
                     f"checkpoint {big['journal']['checkpoint_maxrss_kib'] / KIB:.1f} MiB, restore "
                     f"{big['journal']['restore_maxrss_kib'] / KIB:.1f} MiB")
        copier = res["meta"]["tools"]["legacy_copy"]
        for step, other in (("checkpoint", f"the legacy tick ({copier})"), ("restore", copied_back(copier))):
            j, legacy = big["journal"][step], big["legacy"][step]
            durable = ratios.get(f"big_{step}_durable_journal_over_legacy")
            judge_ratio(verdicts, f"a {big['file_bytes'] / MIB:.0f} MiB file, {step}: wall <= {other}", res,
                        f"big_{step}_wall_journal_over_legacy", 1.0, j["wall_s"], legacy["wall_s"], other,
                        "" if durable is None else f"; until durable {fmt_s(j['durable_s'])} vs "
                                                   f"{fmt_s(legacy['durable_s'])} = {durable:.2f}x")

    def tables(self, big: dict, res: dict) -> list[str]:
        copier = res["meta"]["tools"]["legacy_copy"]
        out = [f"| {big['file_bytes'] / MIB:,.0f} MiB file | wall | until durable | CPU | peak RSS |",
               "|---|---:|---:|---:|---:|"]
        for label, f in (("journal checkpoint", big["journal"]["checkpoint"]),
                         ("journal restore", big["journal"]["restore"]),
                         (f"legacy tick ({copier})", big["legacy"]["checkpoint"]),
                         (copied_back(copier), big["legacy"]["restore"])):
            out.append(f"| {label} | {fmt_s(f['wall_s'])} | {fmt_s(f['durable_s'])} | {fmt_s(f['cpu_s'])} | "
                       f"{f['maxrss_kib'] / KIB:.1f} MiB |")
        out.append("")
        return out


def copied_back(copier: str) -> str:
    """The legacy design's restore of the big file, as the tables name it."""
    return "rsync -a back" if copier == "rsync" else "python copytree back"


def durable(fig: dict) -> dict:
    """``fig`` with ``durable_s``: its wall plus the ``sync`` right after it, the time
    until what the command wrote is on the disk. journal's commands fsync before they
    return (their sync finds little left); ``rsync`` and ``cp`` leave their copy in the
    page cache, so their wall alone is not a time to durable."""
    t0 = time.perf_counter()
    os.sync()
    return {**fig, "durable_s": fig["wall_s"] + time.perf_counter() - t0}


def log_run(run: dict, r: int, runs: int) -> None:
    cp, rs = run["journal"]["checkpoint"], run["journal"]["restore"]
    log(f"big run {r + 1}/{runs}: journal checkpoint peak RSS {cp['maxrss_kib'] / KIB:.0f} MiB in {cp['wall_s']:.1f}s,"
        f" restore {rs['maxrss_kib'] / KIB:.0f} MiB in {rs['wall_s']:.1f}s")
