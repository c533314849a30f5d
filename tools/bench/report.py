"""From the figures to the summary, the ratios, the targets and the tables.

Each part (``parts/``) summarizes its own figures, adds its per-run ratios, judges its
own targets and renders its own tables; this module puts them together in the order of
the parts, and holds what they share: medians, ratios and the formatting of figures.
A ratio is the median of its per-run ratios.
"""

from __future__ import annotations

import statistics

from .measure import KIB, MIB


def med(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def med_fig(figs: list[dict | None]) -> dict | None:
    figs = [f for f in figs if f]
    if not figs:
        return None
    keys = ("bytes", "objects", "wall_s", "cpu_s", "maxrss_kib")
    return {k: med(f.get(k) for f in figs) for k in keys}


def tick_fig(ticks: list[dict]) -> dict:
    """One run's active ticks: mean bytes, wall and CPU per tick; mean and max objects."""
    return {"bytes": statistics.mean(f["bytes"] for f in ticks),
            "objects": statistics.mean(f["objects"] for f in ticks),
            "objects_max": max(f["objects"] for f in ticks),
            "wall_s": statistics.mean(f["wall_s"] for f in ticks),
            "cpu_s": statistics.mean(f["cpu_s"] for f in ticks),
            "maxrss_kib": max(f["maxrss_kib"] for f in ticks)}


def ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def fmt_bytes(n) -> str:
    if n is None:
        return "n/a"
    if n >= 10 * MIB:
        return f"{n / MIB:,.1f} MiB"
    if n >= 10 * KIB:
        return f"{n / KIB:,.1f} KiB"
    return f"{n:,.0f} B"


def fmt_s(s) -> str:
    if s is None:
        return "n/a"
    return f"{s:.2f} s" if s >= 1 else f"{s * 1000:.0f} ms"


class Verdicts(list):
    """The targets, in order: each a name, a verdict (None: not judged) and the figure."""

    def add(self, name: str, ok: bool | None, detail: str) -> None:
        self.append({"name": name, "pass": ok, "detail": detail,
                     "line": f"{'SKIP' if ok is None else 'PASS' if ok else 'FAIL'}  {name}: {detail}"})


def judge_ratio(verdicts: Verdicts, name: str, res: dict, key: str, limit: float, mine, theirs,
                other: str = "legacy", extra: str = "") -> None:
    """Judge the target ``name``: the median per-run ratio ``key`` at most ``limit``;
    the figure names both medians (seconds), the ratio and its per-run range. Not
    judged (nothing added) when a run lacks the figure."""
    r = res["ratios"].get(key)
    if r is None:
        return
    per = [x for x in res["ratios_per_run"][key] if x is not None]
    verdicts.add(name, r <= limit, f"journal {fmt_s(mine)} vs {other} {fmt_s(theirs)} = {r:.2f}x "
                                   f"(per run {min(per):.2f} .. {max(per):.2f}){extra}")


def summarize(res: dict, parts) -> tuple[dict, dict, dict]:
    """(summary, ratios, per-run ratios) of every part that ran, in the parts' order."""
    summary: dict = {}
    spread: dict = {}
    for part in parts:
        figures = res.get(part.name)
        if figures:
            summary[part.summary_key] = part.summarize(figures, spread)
    ratios = {k: med(v) for k, v in spread.items()}
    return summary, ratios, spread


def targets(summary: dict, ratios: dict, res: dict, parts) -> list[dict]:
    verdicts = Verdicts()
    for part in parts:
        if summary.get(part.summary_key):
            part.targets(summary[part.summary_key], ratios, res, verdicts)
    return list(verdicts)


def report(res: dict, parts) -> str:
    """The human-readable tables (markdown): each part's, then the ratios."""
    out: list[str] = []
    for part in parts:
        if res["summary"].get(part.summary_key):
            out.extend(part.tables(res["summary"][part.summary_key], res))
    out.extend(ratio_table(res))
    return "\n".join(out)


def ratio_table(res: dict) -> list[str]:
    def show(v):
        return f"{v:.4f}" + (f" (1/{1 / v:,.1f})" if 0 < v < 0.1 else "")
    if not any(v is not None for v in res["ratios"].values()):
        return []
    out = ["| ratio (median of per-run ratios) | value | per run, min .. max |", "|---|---:|---:|"]
    for k, v in res["ratios"].items():
        if v is not None:
            vals = [x for x in res["ratios_per_run"][k] if x is not None]
            out.append(f"| {k} | {show(v)} | {show(min(vals))} .. {show(max(vals))} |")
    return out
