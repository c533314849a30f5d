"""The errors of the input journal (design §20): an input too large, not found, a
client id reused, a session whose sequence numbers others took."""

from __future__ import annotations

from ..errors import ConfigError, JournalError


class InputTooLarge(ConfigError):
    """An input over the configured limit: refused whole, nothing stored."""

    def __init__(self, size: int | None, limit: int, where: str = "append input"):
        self.size = size
        self.limit = limit
        what = f"is {size:,} bytes, over" if size is not None else "is over"
        super().__init__(f"{where}: the text {what} the input limit of {limit:,} bytes; "
                         "nothing was stored (raise `input_limit` in the config or $JOURNAL_INPUT_LIMIT, "
                         "up to 16 MiB, or send a shorter text)")


class InputNotFound(JournalError):
    """An input id names no input in the store."""

    def __init__(self, input_id: str, key: str):
        self.input_id = input_id
        self.key = key
        super().__init__(f"input: {input_id} is not in the store ({key} does not exist); "
                         "`journal input list` shows the stored inputs")


class ClientIdReused(ConfigError):
    """An append whose client id an input with another text already carries: a retry
    sends the same text, so this is another prompt, and nothing is stored for it."""

    def __init__(self, client_id: str, first: str):
        self.client_id = client_id
        self.first = first
        super().__init__(f"append input: client id {client_id!r} was used already, by input {first}, with another "
                         "text; nothing was stored: give this prompt a new client id (`journal input show "
                         f"{first}` shows the first)")


class InputBusy(JournalError):
    """Other appenders took every sequence number this append tried."""

    def __init__(self, session: str, tries: int):
        super().__init__(f"append input: {tries} sequence numbers of session {session} were taken by other "
                         "appenders while this one tried them; nothing was stored; try again")
