"""What a supervisor says while it runs: one ``Event`` per line of the container's log.

The library never prints. ``Supervisor`` hands each event to a callback (``Log``);
the command line filters it by level and renders it as a line of text or a JSON
object (``cli/supervise_log.py``). An event carries data, not words: what happened
(one of the structs below, its tag the event's name), its level and its time.

==============  =======  ========================================================
event           level    when
==============  =======  ========================================================
``start``       info     CMD started: the store, the startup restore, its duration
``checkpoint``  debug    a tick committed a checkpoint (shown with ``-v``)
``skipped``     debug    a tick came due while another checkpoint held the lock
``note``        debug    an operation's note (a restore's kept local file, ...)
``warning``     warning  an operation's warning; the run goes on
``error``       error    every failure (``part``: what failed), each time
``recovered``   info     the first success of a part after it failed
``stop``        info     a stop signal came before CMD started
``final``       info     the final checkpoint (error when it failed), and the exit
==============  =======  ========================================================
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

import msgspec

from ..local.activity import CheckpointRecord, RestoreRecord


class Level(enum.IntEnum):
    DEBUG = 10      # with -v
    INFO = 20       # by default
    WARNING = 30    # by default
    ERROR = 40      # always, -q too


class Part(str, enum.Enum):
    """What failed, or recovered."""

    RESTORE = "restore"         # the startup restore: CMD is not started
    CMD = "cmd"                 # CMD could not be started
    CHECKPOINT = "checkpoint"   # a timer tick
    INPUTS = "inputs"           # the input server (design §20)
    COPY = "copy"               # a copy of the store on a timer (--copy-to, design §23)
    STATUS = "status"           # writing status.json
    METRICS = "metrics"         # writing --metrics-file


class Started(msgspec.Struct, frozen=True, kw_only=True, tag="start"):
    store: str
    cmd: str                           # CMD's program, without its arguments (they may hold secrets)
    pid: int
    restore: RestoreRecord | None      # None: --no-restore
    restore_seconds: float


class Committed(msgspec.Struct, frozen=True, kw_only=True, tag="checkpoint"):
    checkpoint: CheckpointRecord


class Skipped(msgspec.Struct, frozen=True, kw_only=True, tag="skipped"):
    pass


class Noted(msgspec.Struct, frozen=True, kw_only=True, tag="note"):
    """A note of an operation the supervisor runs (restore, checkpoint)."""

    message: str


class Warned(msgspec.Struct, frozen=True, kw_only=True, tag="warning"):
    message: str


class Failed(msgspec.Struct, frozen=True, kw_only=True, tag="error"):
    part: Part
    error: str
    retry_in: float | None = None   # seconds until it is tried again (None: not retried by itself)
    exit: int | None = None         # supervise exits with this (a failure before CMD started)


class Recovered(msgspec.Struct, frozen=True, kw_only=True, tag="recovered"):
    part: Part
    failures: int                   # how many times in a row it had failed
    seq: int | None = None          # CHECKPOINT: the checkpoint the recovering tick committed or found
    path: str | None = None         # INPUTS: the socket served again


class Stopped(msgspec.Struct, frozen=True, kw_only=True, tag="stop"):
    signal: int
    exit: int


class Final(msgspec.Struct, frozen=True, kw_only=True, tag="final"):
    checkpoint: CheckpointRecord | None     # None when it failed
    last_seq: int | None = None             # an idle final checkpoint: the checkpoint that still holds it all
    error: str | None = None
    cmd_status: int | None = None           # CMD's exit status (128+N: it died of signal N)
    signal: int | None = None               # the stop signal supervise got, if any
    killed: bool = False                    # CMD outlived --grace and was killed with SIGKILL
    exit: int


What = Started | Committed | Skipped | Noted | Warned | Failed | Recovered | Stopped | Final


class Event(msgspec.Struct, frozen=True, kw_only=True):
    time: float
    level: Level
    what: What


Log = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """The default log: a library caller that wants no events."""


def event(level: Level, what: What) -> Event:
    return Event(time=time.time(), level=level, what=what)
