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
