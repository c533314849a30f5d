"""The base of the error hierarchy, and the errors every layer raises: a configuration
that is unusable, a store that failed, an object missing, present or corrupt, a record
too large. Domain errors live next to the code that raises them (``gc/errors.py``,
``restore/errors.py``, ...); the helpers that describe an ``OSError`` are in
``os_errors.py``.

Messages read "verb noun: detail" and end with a hint where the operator can act. A
journal error is never also an ``OSError`` or a ``ValueError``: ``except OSError``
catches what a local file or the system raised, and a journal error passes through it
(design §11.12). Each class carries the status the command line exits with
(``exit_code``, as the README's table lists them); a library message names no option
of the command that was run: the command line adds that (``hints``), and only
``cli/base.py`` turns an error into its line and its exit status.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_ERROR = 1   # failed: the store, a local disk, damage
EXIT_USAGE = 2   # bad input: flags, config, environment


class JournalError(Exception):
    """Base of every error journal raises on purpose. ``exit_code``: the status the
    command line exits with; ``hints``: what the command line says after the message
    (an option of the command that was run: ``with_hint``)."""

    exit_code: ClassVar[int] = EXIT_ERROR
    hints: tuple[str, ...] = ()

    def with_hint(self, hint: str) -> JournalError:
        """This error, with ``hint`` to say after its message; returns it (to raise)."""
        self.hints = (*self.hints, hint)
        return self


class ConfigError(JournalError):
    """The configuration (file, environment or flags) is unusable: bad input."""

    exit_code = EXIT_USAGE


class StoreError(JournalError):
    """A store operation failed for a reason other than a missing or existing key.
    ``backend_said`` keeps what the backend said in full (many lines, for ``--debug``
    and ``--json``) when the message is a summary of it."""

    def __init__(self, message: str, backend_said: str | None = None):
        super().__init__(message)
        self.backend_said = backend_said


class ObjectNotFound(JournalError):
    """A key that should exist does not."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"read object: {key} does not exist in the store")


class KeyExists(JournalError):
    """put_if_absent found the key already present."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"put object: {key} already exists")


class CorruptObject(JournalError):
    """Stored bytes fail their format or hash check."""

    def __init__(self, key: str, detail: str):
        self.key = key
        self.detail = detail
        super().__init__(f"verify object: {key} is corrupt: {detail}")


def ids_apart(got: str, want: str, least: int = 12, past: int = 4) -> tuple[str, str]:
    """Two ids a message names side by side ("holds X, expected Y"), each cut to
    ``least`` characters, or to ``past`` characters past the first place they differ,
    whichever is longer, so the two never read the same."""
    differ = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    width = max(least, differ + 1 + past)
    return got[:width], want[:width]


class RecordTooLarge(JournalError):
    """A writer was about to store a record larger than readers accept for its kind."""

    def __init__(self, kind: str, size: int, limit: int):
        self.kind = kind
        self.size = size
        self.limit = limit
        super().__init__(f"store record: a {kind} of {size:,} bytes is over the {limit:,} bytes a {kind} may "
                         "hold, and readers would refuse it; nothing was stored for it")
