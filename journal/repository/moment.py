"""Naming a checkpoint or a time: the one grammar of ``--at``, ``--since`` and ``diff A B``.

Every command that takes a checkpoint or a time reads it here (design §19, "Naming a
checkpoint or a time"):

- ``42``: checkpoint 42, a fork too (a fork is named by its number only). It must
  exist: a number the store does not hold is an error naming the newest checkpoint.
- ``latest``, ``latest~N``: the newest main-line checkpoint, and the N-th main-line one
  before it. Forks are not counted; an unreadable manifest is (nobody can tell).
- an ISO-8601 time, ``2026-03-01T12:30``: UTC unless it names its zone.
- an ISO-8601 date, ``2026-03-01``: the whole UTC day, so ``--at`` takes its end
  (23:59:59.999999999) and ``--since`` its start.
- a duration ago by this machine's clock: ``90m``, ``2h``, ``3d``, ``1w``, ``1d12h``. A
  unit is required: a bare number is a sequence number.

A time names no checkpoint itself: ``--at`` answers with the newest main-line
checkpoint made at or before it, ``--since`` starts at the first one made at or after it.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from collections.abc import Callable

import msgspec

from ..config import parse_duration
from ..errors import ConfigError

#: What a value may be, for help texts and errors.
GRAMMAR = "a sequence number, latest or latest~N, an ISO-8601 time or date (UTC), or a duration ago (2h, 3d)"
TIME_GRAMMAR = "an ISO-8601 time or date (UTC), or a duration ago (30m, 2h, 7d)"

_LATEST = re.compile(r"latest(?:~(\d+))?")
_DAY_NS = 86_400 * 10**9


class Moment(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpoint or a time as a command line names it (``parse_moment``)."""

    text: str
    op: str = ""                    # the command that read it, and the option it came in:
    flag: str = ""                  # what a message about it names ("restore", "--at")
    seq: int | None = None          # a sequence number: that checkpoint
    back: int | None = None         # ``latest~N``: N main-line checkpoints before the newest
    first_ns: int | None = None     # a time: the first nanosecond it names (UTC)
    last_ns: int | None = None      # ... and the last (a whole day for a date, else ``first_ns``)


def parse_moment(text: str, op: str, flag: str, now_ns: int | None = None) -> Moment:
    """``text`` read by the grammar of the module docstring; ``ConfigError`` (exit 2)
    naming ``op``, ``flag`` and what may be written for anything else."""
    word = text.strip()
    if word.isdigit():
        return Moment(text=text, op=op, flag=flag, seq=int(word))
    latest = _LATEST.fullmatch(word.lower())
    if latest is not None:
        return Moment(text=text, op=op, flag=flag, back=int(latest.group(1) or 0))
    span = _time_span(word, now_ns)
    if span is None:
        raise ConfigError(f"{op}: {flag} {text!r} is neither a sequence number nor an ISO-8601 time; write "
                          f"{GRAMMAR}")
    return Moment(text=text, op=op, flag=flag, first_ns=span[0], last_ns=span[1])


def parse_time(text: str, op: str, flag: str, now_ns: int | None = None) -> Moment:
    """A time only (what names no checkpoint: ``input list --since``), read as
    ``parse_moment`` reads one; ``ConfigError`` for a checkpoint or anything else."""
    word = text.strip()
    span = None if word.isdigit() else _time_span(word, now_ns)
    if span is None:
        hint = f"; {word}s means {word} seconds ago" if word.isdigit() else ""
        raise ConfigError(f"{op}: {flag} {text!r} is neither an ISO-8601 time nor a duration; write "
                          f"{TIME_GRAMMAR}{hint}")
    return Moment(text=text, op=op, flag=flag, first_ns=span[0], last_ns=span[1])


def _time_span(word: str, now_ns: int | None) -> tuple[int, int] | None:
    """(first, last) nanosecond a date, a time or a duration ago names; None if none."""
    if re.fullmatch(r"[0-9.]+[a-z][0-9a-z.]*", word.lower()):
        try:
            ago = parse_duration(word, "")
        except ConfigError:
            return None
        when = (time.time_ns() if now_ns is None else now_ns) - int(ago * 1e9)
        return when, when
    try:
        day = _dt.date.fromisoformat(word)
    except ValueError:
        pass
    else:
        start = _utc_ns(_dt.datetime(day.year, day.month, day.day))
        return start, start + _DAY_NS - 1
    try:
        when = _utc_ns(_dt.datetime.fromisoformat(word))
    except (ValueError, OverflowError):
        return None
    return when, when


def _utc_ns(when: _dt.datetime) -> int:
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    delta = when - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def checkpoint_named(moment: Moment, seqs: list[int], is_fork: Callable[[int], bool], op: str,
                     flag: str) -> int | None:
    """The checkpoint a sequence number or ``latest~N`` names, among ``seqs`` (every
    manifest, ascending); None for a time. ``ConfigError`` when the store holds no such
    checkpoint, naming the newest."""
    if moment.seq is not None:
        if moment.seq not in seqs:
            raise _missing(op, flag, moment, seqs, f"the store holds no checkpoint {moment.seq}")
        return moment.seq
    if moment.back is None:
        return None
    main = 0
    for seq in reversed(seqs):
        if is_fork(seq):
            continue
        if main == moment.back:
            return seq
        main += 1
    held = f"only {main} main-line checkpoint(s)" if main else "no main-line checkpoint"
    raise _missing(op, flag, moment, seqs, f"the store holds {held}"
                   + (f", so latest~{main - 1} is the oldest" if main else ""))


def _missing(op: str, flag: str, moment: Moment, seqs: list[int], detail: str) -> ConfigError:
    newest = f"the newest is checkpoint {seqs[-1]}" if seqs else "it holds no checkpoint yet"
    return ConfigError(f"{op}: {flag} {moment.text}: {detail}; {newest} (`journal log` lists them)")


def before_oldest(op: str, flag: str, text: str | None, seqs: list[int]) -> ConfigError:
    """A time before the oldest checkpoint (or no checkpoint at all)."""
    oldest = f"the oldest is checkpoint {seqs[0]}" if seqs else "the store holds no checkpoint yet"
    return ConfigError(f"{op}: no checkpoint at or before {flag} {text}; {oldest} (`journal log` lists them)")
