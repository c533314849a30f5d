"""The errors of a checkpoint: paths that failed, a path the path rule refuses, a
checkpoint refused after an incomplete restore."""

from __future__ import annotations

from ..errors import JournalError


class CheckpointErrors(JournalError):
    """The checkpoint finished every tree it could, but some paths failed."""

    def __init__(self, errors: list[str], seq: int | None):
        self.errors = errors
        self.seq = seq
        done = f"checkpoint {seq} committed the rest" if seq else "nothing else needed committing"
        super().__init__(f"checkpoint: {len(errors)} failure(s) ({done}): " + "; ".join(errors))


class Unstorable(JournalError):
    """A live path the path rule refuses (``local/treepath.py``): checkpoint skips it, loudly."""

    def __init__(self, path: str, reason: str, fix: str = "rename it"):
        self.path = path
        self.reason = reason
        super().__init__(f"checkpoint: skipping {path}: {reason}; {fix} to checkpoint it")


class CheckpointAfterIncompleteRestore(JournalError):
    """A checkpoint refused: the last restore on this machine did not finish (it could not
    rebuild everything, or it was stopped); checkpoints wait for it (``RestoreIncomplete``
    is that restore's own error)."""

    def __init__(self, state_path: str):
        self.state_path = state_path
        super().__init__(
            f"checkpoint: the last `journal restore` here was incomplete ({state_path}); run it again "
            "(after fixing what it reported), or accept what is on disk with `journal takeover`"
        )
