"""The errors of a copy: a target that has moved on, or that would receive what the
source keeps sealed in the clear, or that is the source itself."""

from __future__ import annotations

from ..errors import ConfigError, JournalError


class TargetMovedOn(JournalError):
    """The target holds a checkpoint the source did not write there: a writer of its own,
    or a copy of another store. A copy never writes over it."""

    def __init__(self, target: str, detail: str):
        self.target = target
        super().__init__(f"copy: the target {target} has moved on: {detail}; a copy never writes over a target "
                         "that holds checkpoints of its own: copy to a new, empty location (nothing was written)")


class PlainTarget(ConfigError):
    """The source is encrypted and the target is (or would be created) plain: a copy
    would write every object in the clear."""

    def __init__(self, source: str, target: str, why: str):
        super().__init__(f"copy: {source} is encrypted and {target} {why}: the copy would write every checkpoint "
                         "there in the clear; nothing was written")


class SameStore(ConfigError):
    """The target named is the source itself."""

    def __init__(self, location: str):
        super().__init__(f"copy: the target {location} is the source store itself; name another location")


class TargetUnproven(JournalError):
    """The source no longer holds (and no later checkpoint of it names) the target's
    newest checkpoint, so nothing shows that the target has not moved on."""

    def __init__(self, target: str, seq: int):
        self.target = target
        self.seq = seq
        super().__init__(f"copy: the source no longer holds checkpoint {seq}, the newest of the target {target} "
                         "(its gc expired it), and no later checkpoint of the source names it, so nothing shows "
                         "that the target holds only the source's checkpoints; nothing was written: copy to a new, "
                         "empty location")
