"""What a part of the benchmark is: a run, and what it adds to the summary, the ratios,
the targets and the tables (``report.py`` puts the parts together)."""

from __future__ import annotations


class Part:
    """One part. ``name`` is its ``--parts`` name and the key of its figures in the JSON;
    ``summary_key`` its key in the summary (default: ``name``)."""

    name = ""
    summary_key = ""

    def __init__(self) -> None:
        self.summary_key = self.summary_key or self.name

    def run(self, args, tools, work: str) -> dict:
        """Run the part (``work`` is a scratch directory); its figures, as JSON values."""
        raise NotImplementedError

    def summarize(self, figures: dict, spread: dict) -> dict:
        """The part's summary of its figures; it adds its per-run ratios to ``spread``
        (ratio name -> one value per run)."""
        return {}

    def targets(self, summary: dict, ratios: dict, res: dict, verdicts) -> None:
        """Judge the part's targets (``verdicts.add(name, ok, detail)``)."""

    def tables(self, summary: dict, res: dict) -> list[str]:
        """The part's tables (markdown lines)."""
        return []
