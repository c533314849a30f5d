"""The error of ``journal mount``: where it was asked to mount cannot be mounted on."""

from __future__ import annotations

from ...errors import ConfigError


class CannotMount(ConfigError):
    """``mount``: the directory is missing, not empty or already a mount point, or this
    machine has no FUSE (the library, the Python binding or ``/dev/fuse``); nothing was
    mounted."""

    def __init__(self, shown: str, detail: str):
        self.shown = shown
        super().__init__(f"mount {shown}: {detail}")
