"""A tree's cached paths held by directory (``journal/local/files.py``): every operation
agrees with the same operation on a plain dict, groups no change touched stay the very
objects they were, and a group stored as bytes decodes only when asked for."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal.format.model import Entry
from journal.local import files as files_mod
from journal.local.files import HAS_DB, FileState, Files, Group, parent

DIRS = ["", "a", "a/b", "c"]
paths = st.builds(lambda d, n: f"{d}/f{n}" if d else f"f{n}", st.sampled_from(DIRS), st.integers(0, 6))


def state(path: str, n: int, kind: str = "file") -> FileState:
    return FileState((n, n, n, 0o100644), Entry(path=path, kind=kind, mode=0o644, size=n))


values = st.builds(lambda n, k: (n, k), st.integers(0, 3), st.sampled_from(["file", "dir", "sqlite", "jsonl"]))
tables = st.dictionaries(paths, values, max_size=25)


def made(table: dict) -> dict[str, FileState]:
    return {p: state(p, n, kind) for p, (n, kind) in table.items()}


def totals(files: Files) -> tuple[int, int, int]:
    plain = [fs.entry for fs in files.values() if fs.entry.kind != "dir"]
    return len(plain), sum(e.size for e in plain), sum(1 for e in plain if e.kind == "sqlite")


@settings(max_examples=300, deadline=None)
@given(tables, tables, st.lists(paths, max_size=6))
def test_changes_and_diffs_agree_with_a_plain_dict(first, second, gone):
    old_plain = made(first)
    old = Files.of(old_plain)
    assert old == old_plain and len(old) == len(old_plain) and sorted(old) == sorted(old_plain)
    set_ = made(second)
    now = old.changed(set_, gone)
    want = {p: fs for p, fs in old_plain.items() if p not in gone}
    want.update(set_)
    assert now == want and dict(now.items()) == want and len(now) == len(want)
    assert (now.nfiles, now.nbytes) == totals(now)[:2]
    for d, group in now.groups.items():
        assert group.n == len(group.paths) > 0 and all(parent(p) == d for p in group.paths)
        assert bool(group.flags & HAS_DB) == any(fs.entry.kind == "sqlite" for fs in group.paths.values())
        if not any(parent(p) == d for p in (*set_, *gone)):
            assert group is old.groups[d]   # untouched: the very group
    changed, lost, dirs = now.diff(old)
    assert old.changed(changed, lost) == want
    assert set(lost) == set(old_plain) - set(want) and set(now.gone_from(old)) == set(lost)
    assert all(old_plain.get(p) != fs for p, fs in changed.items())
    assert sorted(dirs) == sorted({parent(p) for p in (*changed, *lost)})
    assert now.diff(now) == ({}, [], [])


@settings(max_examples=200, deadline=None)
@given(tables, tables, st.sets(st.sampled_from(DIRS)))
def test_a_build_keeps_the_groups_taken_and_those_read_back_unchanged(first, second, take):
    old = Files.of(made(first))
    taken = {d: g for d, g in old.groups.items() if d in take}
    read = {p: fs for p, fs in old.items() if parent(p) not in take}  # read back: the same objects
    read.update({p: fs for p, fs in made(second).items() if parent(p) not in take})
    built = Files.build(taken, read, old)
    want = {p: fs for p, fs in old.items() if parent(p) in take}
    want.update(read)
    assert built == want
    for d, group in built.groups.items():
        if d in taken or all(old.get(p) is fs for p, fs in group.paths.items()) and group.n == old.groups[d].n:
            assert group is old.groups[d]


def test_a_stored_group_decodes_once_and_only_when_asked(monkeypatch):
    paths = made({"d/x": (1, "file"), "d/y": (2, "sqlite")})
    record = msgspec.msgpack.decode(msgspec.msgpack.encode(Group.of(paths).record()), type=files_mod.GroupRecord)
    group = Group.stored(record)
    calls = []
    real = files_mod._decode
    monkeypatch.setattr(files_mod, "_decode", lambda raw: calls.append(1) or real(raw))
    files = Files({"d": group})
    assert (len(files), files.nfiles, files.nbytes, group.flags) == (2, 2, 3, HAS_DB) and not calls
    assert files["d/y"] == paths["d/y"] and files.get("d/x") == paths["d/x"] and "d/z" not in files
    assert calls == [1]
    assert group.record().paths == msgspec.Raw(files_mod._encode(group.paths))


def test_a_stored_group_that_holds_another_count_than_its_record_is_refused():
    raw = msgspec.Raw(files_mod._encode(made({"d/x": (1, "file")})))
    with pytest.raises(ValueError, match="holds 1 paths, its record says 2"):
        Group.stored(files_mod.GroupRecord(2, 2, 2, 0, raw)).paths


def test_a_file_state_is_never_changed_in_place():
    """A save finds what changed by identity first, so a path's new state is a new object."""
    fs = state("d/x", 1)
    for field, value in [("sig", None), ("entry", state("d/x", 2).entry), ("roll", 5), ("dev", 7)]:
        with pytest.raises(AttributeError):
            setattr(fs, field, value)
    assert fs == state("d/x", 1)


def test_a_file_state_without_a_device_reads_as_unknown_and_a_reader_without_the_field_skips_it():
    class Older(msgspec.Struct, array_like=True):   # the path's state as a reader before ``dev`` knew it
        sig: tuple[int, int, int, int] | None
        entry: Entry
        roll: int = 0

    fs = FileState((1, 2, 3, 0o100644), Entry(path="t.jsonl", kind="jsonl", mode=0o644, size=1), 9, 2049)
    older = msgspec.msgpack.decode(msgspec.msgpack.encode(fs), type=Older)
    assert (older.sig, older.entry, older.roll) == (fs.sig, fs.entry, 9)
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(older), type=FileState)
    assert again.dev == 0 and again == msgspec.structs.replace(fs, dev=0)
