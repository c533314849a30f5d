"""The crypto part (issue 28): the main workload and its active ticks, checkpointed side
by side into a plain store and an encrypted one (``init --encrypt``, a key file), the
two interleaved (the order rotates every tick, and every run); then an idle tick and a
full restore from each. Both stores are made before the initial checkpoint, outside any
measurement, so neither's initial figures count its config (or key object).

Targets: bytes and objects per active tick within 5% of the plain store's, CPU per
active tick within 15%, a full restore's wall within 15% (each the median of the
per-run ratios encrypted/plain)."""

from __future__ import annotations

import os
import statistics

from ..measure import KIB, log, rmtree, rotate
from ..report import fmt_s, med, ratio, tick_fig
from ..systems import JournalSys
from .base import Part
from .main import drive, figures_table, fresh_run, main_template, summarize_system

SYSTEMS = ("plain", "encrypted")
#: What a sealed record adds to its plaintext (design §22: nonce and tag).
SEAL_OVERHEAD = 12 + 16


class CryptoPart(Part):
    name = "crypto"

    def run(self, args, tools, work: str) -> dict:
        tpl, local_tpl, info, workload = main_template(args, work, self.name)
        runs = [self._run(args, tools, work, local_tpl, info, r) for r in range(args.runs)]
        rmtree(tpl)
        return {"workload": workload, "runs": runs}

    def _run(self, args, tools, work: str, local_tpl: str, info: dict, r: int) -> dict:
        rd, local, live = fresh_run(args, work, local_tpl, info, self.name, r)
        systems = [JournalSys(tools, local, os.path.join(rd, f"store-{name}"), os.path.join(rd, f"home-{name}"),
                              key_file=os.path.join(rd, "store.key") if name == "encrypted" else None, name=name,
                              state_dir=os.path.join(rd, f"state-{name}"))
                   for name in SYSTEMS]
        for s in systems:
            s.init()
        run = drive(systems, live, args, r)
        live.close()
        for s in rotate(systems, r):
            dest = os.path.join(rd, f"restore-{s.name}")
            run[s.name]["restore"] = s.restore(dest)
            rmtree(dest)
            run[s.name]["idle_in_process_s"] = s.in_process_idle()
            run[s.name]["restore_in_process_s"] = s.in_process_restore(dest)
            rmtree(dest)
        plain, enc = (statistics.mean(f["bytes"] for f in run[n]["ticks"]) for n in SYSTEMS)
        log(f"crypto run {r + 1}/{args.runs}: tick plain {plain / KIB:.1f} KiB, encrypted {enc / KIB:.1f} KiB; "
            f"restore plain {run['plain']['restore']['wall_s']:.2f}s, "
            f"encrypted {run['encrypted']['restore']['wall_s']:.2f}s")
        rmtree(rd)
        return run

    def summarize(self, figures: dict, spread: dict) -> dict:
        runs = figures["runs"]
        sm: dict = {name: summarize_system(runs, name) for name in SYSTEMS}
        for name in SYSTEMS:
            for key in ("idle_in_process_s", "restore_in_process_s"):
                sm[name][key] = med(r[name][key] for r in runs)
        sm["tick_extra_bytes"] = med(tick_fig(r["encrypted"]["ticks"])["bytes"] - tick_fig(r["plain"]["ticks"])["bytes"]
                                     for r in runs)
        sm["tick_records"] = med(statistics.mean(f["records"] for f in r["plain"]["ticks"]) for r in runs)
        sm["tick_seal_bytes"] = sm["tick_records"] * SEAL_OVERHEAD
        spread.update(per_run_ratios(runs))
        return sm

    def targets(self, sm: dict, ratios: dict, res: dict, verdicts) -> None:
        rb, ro = ratios["crypto_tick_bytes_encrypted_over_plain"], ratios["crypto_tick_objects_encrypted_over_plain"]
        verdicts.add("encrypted store: bytes and objects per active tick within 5% of a plain store",
                     abs(rb - 1) <= 0.05 and abs(ro - 1) <= 0.05,
                     f"bytes {fmt_ratio(rb)} ({sm['encrypted']['tick']['bytes'] / KIB:.1f} vs "
                     f"{sm['plain']['tick']['bytes'] / KIB:.1f} KiB, {sm['tick_extra_bytes']:+.0f} B; sealing adds "
                     f"{sm['tick_records']:.1f} records x {SEAL_OVERHEAD} B = {sm['tick_seal_bytes']:.0f} B, the rest "
                     f"is where the keyed page boundaries fall), objects {fmt_ratio(ro)}")
        rc = ratios["crypto_tick_cpu_encrypted_over_plain"]
        verdicts.add("encrypted store: CPU per active tick within 15% of a plain store", rc <= 1.15,
                     f"{fmt_s(sm['encrypted']['tick']['cpu_s'])} vs {fmt_s(sm['plain']['tick']['cpu_s'])} = "
                     f"{fmt_ratio(rc)}")
        rr = ratios["crypto_restore_wall_encrypted_over_plain"]
        verdicts.add("encrypted store: full restore wall within 15% of a plain store", rr <= 1.15,
                     f"{fmt_s(sm['encrypted']['restore']['wall_s'])} vs {fmt_s(sm['plain']['restore']['wall_s'])} = "
                     f"{fmt_ratio(rr)}; CPU {fmt_ratio(ratios['crypto_restore_cpu_encrypted_over_plain'])}, "
                     f"in-process wall {fmt_ratio(ratios['crypto_restore_in_process_encrypted_over_plain'])}")

    def tables(self, sm: dict, res: dict) -> list[str]:
        out = figures_table(sm, res, SYSTEMS, "main workload, encrypted vs plain store")
        out.append(f"records per active tick (plain store): {sm['tick_records']:.1f}; sealing them adds "
                   f"{sm['tick_seal_bytes']:.0f} B ({sm['tick_seal_bytes'] / sm['plain']['tick']['bytes'] * 100:.1f}% "
                   f"of the plain tick); the encrypted tick measured {sm['tick_extra_bytes']:+.0f} B")
        for name in SYSTEMS:
            out.append(f"{name} store in-process (as `journal supervise` runs them): idle tick "
                       f"{fmt_s(sm[name]['idle_in_process_s'])}, full restore {fmt_s(sm[name]['restore_in_process_s'])}")
        out.append("")
        return out


def fmt_ratio(r: float) -> str:
    return f"{r:.3f}x ({(r - 1) * 100:+.1f}%)"


def per_run_ratios(runs: list[dict]) -> dict[str, list]:
    """encrypted over plain, per run: active-tick bytes, objects, wall and CPU; initial
    bytes and wall; idle wall; restore wall and CPU by the CLI, and wall in-process."""
    def each(get):
        return [ratio(get(r["encrypted"]), get(r["plain"])) for r in runs]
    out = {f"crypto_tick_{k.split('_')[0]}_encrypted_over_plain": each(lambda s, k=k: tick_fig(s["ticks"])[k])
           for k in ("bytes", "objects", "wall_s", "cpu_s")}
    for k in ("bytes", "wall_s"):
        out[f"crypto_initial_{k.split('_')[0]}_encrypted_over_plain"] = each(lambda s, k=k: s["initial"][k])
    out["crypto_idle_wall_encrypted_over_plain"] = each(lambda s: s["idle"]["wall_s"])
    out["crypto_restore_wall_encrypted_over_plain"] = each(lambda s: s["restore"]["wall_s"])
    out["crypto_restore_cpu_encrypted_over_plain"] = each(lambda s: s["restore"]["cpu_s"])
    out["crypto_restore_in_process_encrypted_over_plain"] = each(lambda s: s["restore_in_process_s"])
    return out
