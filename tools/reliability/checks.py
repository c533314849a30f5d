"""What a restored tree must be, given the versions the checkpoints were taken of.

A ``Version`` is what the live trees held when one checkpoint was attempted
(``describe_tree`` of each tree) and how that checkpoint ended: ``ok`` (it
committed), or ``killed``/``failed`` (it may or may not have committed: a manifest put
that landed before the kill or the fault counts). While no writer runs during a
checkpoint, a restore must reproduce exactly one version: the last that committed or
an attempt after it (``judge``). When it does not, ``explain`` says which invariant
broke, path by path:

* every restored file equals some checkpointed version of it;
* a transcript is a complete-line prefix holding everything up to the last successful
  checkpoint (here: exactly its complete lines then, or an attempt's after it);
* every database passes ``integrity_check`` and holds at least the commits made
  before the last successful checkpoint (``("db", c)`` with ``c`` at least that);
* nothing the last successful checkpoint held is missing.

With a writer running beside the checkpoints (``judge_concurrent``) the exact version
is unknown; there the floors measured before the last successful checkpoint began,
and the live files after the writer died, bound what may be restored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from journal.paths import shown

OK, KILLED, FAILED = "ok", "killed", "failed"
Trees = dict[str, dict[str, tuple]]


@dataclass
class Version:
    label: str
    trees: Trees
    status: str = OK
    seq: int | None = None


@dataclass
class Floors:
    """Measured just before a checkpoint began, while a writer ran: each transcript's
    complete-line length and each database's reported commit counter (at least)."""

    transcripts: dict[str, int] = field(default_factory=dict)
    dbs: dict[str, int] = field(default_factory=dict)


def last_ok(versions: list[Version]) -> int | None:
    """The index of the last version whose checkpoint committed."""
    for i in range(len(versions) - 1, -1, -1):
        if versions[i].status == OK:
            return i
    return None


def differences(got: Trees, want: Trees, limit: int = 4) -> list[str]:
    """The first few paths where ``got`` and ``want`` differ, each one line."""
    out = []
    for tree in sorted(set(got) | set(want)):
        g, w = got.get(tree, {}), want.get(tree, {})
        for path in sorted(set(g) | set(w)):
            if g.get(path) != w.get(path):
                out.append(f"{tree}/{shown(path)}: restored {_short(g.get(path))}, expected {_short(w.get(path))}")
                if len(out) >= limit:
                    return out
    return out


def _short(value: tuple | None) -> str:
    if value is None:
        return "nothing"
    return "(" + ", ".join(shown(str(v)[:16]) for v in value) + ")"


def unprintable(warnings: list[str]) -> list[str]:
    """Each warning that is not one printable line: it named a path raw (design §11.12),
    and a name holding an escape sequence or a newline would reach the terminal."""
    return [f"a warning is not one printable line: {shown(w)}" for w in warnings if not w.isprintable()]


def judge(restored: Trees, versions: list[Version]) -> list[str]:
    """Violations of a restore of the newest checkpoint (no writer ran meanwhile)."""
    start = last_ok(versions)
    candidates = versions if start is None else versions[start:]
    if any(restored == v.trees for v in candidates):
        return []
    if start is None and not any(restored.values()):
        return []  # nothing ever committed, nothing restored
    return explain(restored, versions, start)


def explain(restored: Trees, versions: list[Version], start: int | None) -> list[str]:
    """Which invariants a restore that matches no single version breaks."""
    out = []
    base = versions[start].trees if start is not None else {}
    later = versions[start:] if start is not None else versions
    for tree, paths in sorted(restored.items()):
        for path, value in sorted(paths.items()):
            held = [v.trees.get(tree, {}).get(path) for v in versions]
            floor = base.get(tree, {}).get(path)
            where = f"{tree}/{shown(path)}"
            if value[0] == "db-bad":
                out.append(f"{where}: restored database is bad: {value[1]}")
            elif value[0] == "db":
                if floor is not None and floor[0] == "db" and value[1] < floor[1]:
                    out.append(f"{where}: restored database holds commit {value[1]}, the last successful "
                               f"checkpoint had {floor[1]}")
            elif value[0] == "jsonl":
                if floor is not None and floor[0] == "jsonl" and value[2] < floor[2]:
                    out.append(f"{where}: restored transcript has {value[2]} bytes of complete lines, the "
                               f"last successful checkpoint had {floor[2]}")
                elif value not in held:
                    out.append(f"{where}: restored transcript is no checkpointed version of it")
            elif value not in held:
                out.append(f"{where}: restored {_short(value)}, which no checkpoint held")
    for tree, paths in sorted(base.items()):
        for path in sorted(paths):
            if path not in restored.get(tree, {}) and all(path in v.trees.get(tree, {}) for v in later):
                out.append(f"{tree}/{shown(path)}: lost (the last successful checkpoint held it)")
    if not out:
        diff = differences(restored, versions[-1].trees)
        out.append("the restored trees mix versions: they equal no single checkpoint (against the last attempt: "
                   + "; ".join(diff) + ")")
    return out


def judge_partial(present: Trees, want: Trees) -> list[str]:
    """A restore killed part way: every path it left equals what it was writing (or is
    a directory); nothing else is at a live path (a half-written file, a stray)."""
    out = []
    for tree, paths in sorted(present.items()):
        for path, value in sorted(paths.items()):
            expected = want.get(tree, {}).get(path)
            if value == expected or (value[0] == "dir" and expected is not None and expected[0] == "dir"):
                continue
            out.append(f"{tree}/{shown(path)}: a killed restore left {_short(value)} at a live path, expected "
                       f"{_short(expected)}")
    return out


def judge_concurrent(restored: Trees, floors: Floors, live: Trees, live_bytes: dict[str, bytes]) -> list[str]:
    """A restore of a checkpoint taken while a writer ran (``floors`` measured just before
    it began); ``live``/``live_bytes``: the trees and the transcripts' bytes after the
    writer was killed. Transcripts: complete lines, a prefix of the live file, at least
    the floor; databases: good, at least the floor's commit, at most the live one's."""
    out = []
    for key, length in sorted(floors.transcripts.items()):
        tree, _, path = key.partition("/")
        value = restored.get(tree, {}).get(path)
        if value is None:
            out.append(f"{shown(key)}: lost")
            continue
        data = live_bytes[key]
        if value[2] < length:
            out.append(f"{shown(key)}: restored {value[2]} bytes of complete lines, {length} were complete before the "
                       "last successful checkpoint began")
        if value[2] > len(data) or hashlib.sha256(data[:value[2]]).hexdigest() != value[1] \
                or (value[2] and data[value[2] - 1:value[2]] != b"\n"):
            out.append(f"{shown(key)}: restored transcript is not a complete-line prefix of the live one")
    for key, floor in sorted(floors.dbs.items()):
        tree, _, path = key.partition("/")
        value = restored.get(tree, {}).get(path)
        top = live.get(tree, {}).get(path)
        if value is None:
            out.append(f"{shown(key)}: lost")
        elif value[0] != "db":
            out.append(f"{shown(key)}: restored database is bad: {value[1]}")
        elif value[1] < floor:
            out.append(f"{shown(key)}: restored commit {value[1]}, commit {floor} was done before the last successful "
                       "checkpoint began")
        elif top is not None and top[0] == "db" and value[1] > top[1]:
            out.append(f"{shown(key)}: restored commit {value[1]}, the live database never got past {top[1]}")
    return out
