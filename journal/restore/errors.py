"""The errors of a restore: files it could not rebuild, an export directory it must
not mix with."""

from __future__ import annotations

from ..errors import ConfigError, JournalError
from ..paths import shown


class RestoreIncomplete(JournalError):
    """This restore could not rebuild every file; the restore-complete marker is not
    written (so checkpoints refuse: ``CheckpointAfterIncompleteRestore``)."""

    def __init__(self, lost: list[str], uncreatable: list[str] = ()):
        self.lost = lost
        self.uncreatable = list(uncreatable)
        parts = []
        if lost:
            parts.append(f"{len(lost)} file(s) have no good copy in any manifest: {_shown(lost)}; "
                         "run `journal verify --full` to see which objects are damaged")
        if uncreatable:
            parts.append(f"{len(uncreatable)} path(s) are too long to create here: {_shown(uncreatable)}; "
                         "shorten the tree's directory, or export with `journal restore --to` a shorter DIR")
        super().__init__("restore: " + "; ".join(parts))


def _shown(paths: list[str]) -> str:
    return ", ".join(map(shown, paths[:5])) + (" ..." if len(paths) > 5 else "")


class ExportNotEmpty(ConfigError):
    """An export's directory holds something an export must not mix with or delete."""

    def __init__(self, to: str, detail: str):
        self.to = to
        super().__init__(f"restore: export directory {to}: {detail}")


#: How a pattern names paths, said by every error about one.
_PATTERN_HINT = ("patterns match TREE/PATH as `journal ls` shows it (`*` stops at '/', `**` crosses it: "
                 "`**/*.db` is every database); a directory takes everything under it")


class BadInclude(ConfigError):
    """A partial restore's pattern that no path of a tree can match."""

    def __init__(self, pattern: str, detail: str):
        self.pattern = pattern
        super().__init__(f"restore: pattern {pattern!r}: {detail}; {_PATTERN_HINT}")


class IncludeMatchesNothing(ConfigError):
    """A partial restore's pattern that matches no path of the checkpoint: nothing is restored."""

    def __init__(self, pattern: str, seq: int | None, unreadable: list[str] = ()):
        self.pattern = pattern
        self.seq = seq
        where = f"checkpoint {seq}" if seq is not None else "the store (it holds no checkpoint)"
        also = f" (tree(s) {', '.join(unreadable)} could not be read)" if unreadable else ""
        super().__init__(f"restore: pattern {pattern!r} matches no path of {where}{also}; nothing was restored; "
                         f"{_PATTERN_HINT}")


class PartialRestoreRefused(ConfigError):
    """A partial restore onto the live trees where only a whole one is safe."""

    def __init__(self, detail: str):
        super().__init__(f"restore: a partial restore onto the live trees is refused: {detail}; nothing was "
                         "changed")
