"""The errors of ``ls``, ``cat``, ``diff``, ``find``, ``sessions`` and ``show``: a
TREE/PATH, harness or session id that names nothing, a path with no good copy."""

from __future__ import annotations

from ..errors import ConfigError, JournalError


class BadBrowsePath(ConfigError):
    """``ls``, ``cat``, ``diff``, ``find``: a TREE/PATH that is malformed, names no tree or
    path of the checkpoint, or names what the command cannot show (``cat`` of a directory)."""

    def __init__(self, op: str, shown: str, detail: str):
        self.shown = shown
        self.detail = detail
        super().__init__(f"{op}: {shown}: {detail}")


class BadSessionId(ConfigError):
    """``find --session``, ``show``: an id no harness writes, or too short to name one session."""

    def __init__(self, shown: str, detail: str, op: str = "find"):
        self.shown = shown
        super().__init__(f"{op}: session id {shown}: {detail}; give at least 8 leading characters of the id as the "
                         "harness wrote it (letters, digits, '.', '_' and '-')")


class NoSuchSession(JournalError):
    """``find --session``: no checkpoint looked at holds a session whose id begins so."""

    def __init__(self, session: str, detail: str):
        self.session = session
        super().__init__(f"find: no session id begins with {session!r} {detail}; check the id the harness printed "
                         "(`journal find '*.jsonl'` lists the transcripts)")


class UnknownHarness(ConfigError):
    """``sessions --harness``: a name that is no harness whose sessions journal reads."""

    def __init__(self, name: str, known: list[str]):
        self.name = name
        super().__init__(f"sessions: no harness {name!r}; the known ones are {', '.join(known)}")


class SessionNotFound(JournalError):
    """``show``: no harness tree of the checkpoint holds a session whose id begins so."""

    def __init__(self, session: str, seq: int, detail: str):
        self.session = session
        super().__init__(f"show: no session id begins with {session!r} in checkpoint {seq} ({detail}); "
                         f"`journal sessions --at {seq}` lists the sessions it holds")


class AmbiguousSession(ConfigError):
    """``show``: several sessions' ids begin with the id given."""

    def __init__(self, session: str, seq: int, found: list[str]):
        self.session = session
        super().__init__(f"show: {len(found)} sessions begin with {session!r} in checkpoint {seq} "
                         f"({', '.join(found)}); give more of the id")


class NoGoodCopy(JournalError):
    """A path of a checkpoint whose every copy (its own and every older one) is damaged
    or missing; ``written`` bytes of it already went out when ``cat`` found that out."""

    def __init__(self, op: str, shown: str, detail: str, written: int = 0):
        self.shown = shown
        self.written = written
        lost = (f"; the output is INCOMPLETE: {written:,} bytes were written before the damage was found, and no "
                "older copy begins with them" if written else "")
        super().__init__(f"{op}: {shown}: no good copy ({detail}){lost}; run `journal verify --full` to see which "
                         "objects are damaged")
