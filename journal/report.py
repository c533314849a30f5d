"""How operations tell the caller what they are doing. The library never prints."""

from __future__ import annotations


class Reporter:
    """Receives warnings, notes and progress. The default does nothing."""

    def warn(self, message: str) -> None:
        """Something the operator should know about; the operation went on."""

    def note(self, message: str) -> None:
        """An informational line."""

    def progress(self, done: int, total: int) -> None:
        """``done`` of ``total`` units of the current long step are finished."""


class Collector(Reporter):
    """A reporter that keeps what it is told, for a caller that reads it afterwards (the
    tests use it). The CLI prints through its own reporter (``cli/app.py``)."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.notes: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def note(self, message: str) -> None:
        self.notes.append(message)


SILENT = Reporter()
