"""Change signatures (``journal/signatures.py``): one named type per kind of entry, each
stored as a plain tuple; file times outside what an entry holds (int64 ns: 1677-09-21
to 2262-04-11) are clamped, with one warning naming the path, and never a reason to
commit nothing."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import CodexLive
from journal.signatures import live_signature, signature

#: ns since the epoch: the year 5138 and the year -1199, both outside int64 ns.
FAR_FUTURE, FAR_PAST = 10 ** 20, -(10 ** 20)
#: What an entry holds: int64 ns (``format.model.Nanos``, ``signatures.MTIME_MIN``/``MAX``).
MTIME_MIN, MTIME_MAX = -(1 << 63), (1 << 63) - 1


def _set_time(path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))
    if os.stat(path).st_mtime_ns != ns:
        pytest.skip(f"this filesystem does not hold the time {ns} ns (tmpfs does)")


@pytest.fixture
def far(root) -> CodexLive:
    """A Codex home with a file of each far time (``touch -d 2300-01-01`` too) beside a plain one."""
    live = CodexLive(root)
    live.write("plain.txt", "plain\n")
    _set_time(live.write("future.txt", "from the future\n"), FAR_FUTURE)
    _set_time(live.write("past.txt", "from the past\n"), FAR_PAST)
    touched = live.write("touched.txt", "touched\n")
    subprocess.run(["touch", "-d", "2300-01-01", str(touched)], check=True)
    return live


def test_clamping_keeps_every_time_in_range_and_leaves_the_rest_as_it_is():
    from journal.signatures import clamp_mtime

    assert clamp_mtime(FAR_FUTURE) == MTIME_MAX
    assert clamp_mtime(FAR_PAST) == MTIME_MIN
    assert clamp_mtime(MTIME_MAX) == MTIME_MAX and clamp_mtime(MTIME_MIN) == MTIME_MIN
    assert clamp_mtime(1_700_000_000_123_456_789) == 1_700_000_000_123_456_789


def test_a_file_time_past_2262_or_before_1677_is_stored_clamped_with_one_warning_naming_it(far):
    proc = far.run("checkpoint", "--json", expect=0)

    assert "Traceback" not in proc.stderr
    warnings = json.loads(proc.stdout)["warnings"]
    assert len(warnings) == 3, warnings
    for name, when in [("future.txt", "after 2262-04-11"), ("past.txt", "before 1677-09-21"),
                       ("touched.txt", "after 2262-04-11")]:
        assert [w for w in warnings if str(far.codex / name) in w and when in w], (name, warnings)
    entries = far.entries("codex")
    assert entries["future.txt"].mtime_ns == entries["touched.txt"].mtime_ns == MTIME_MAX
    assert entries["past.txt"].mtime_ns == MTIME_MIN
    assert entries["plain.txt"].mtime_ns == os.stat(far.codex / "plain.txt").st_mtime_ns

    far.write("later.txt", "a later change\n")
    report = json.loads(far.run("checkpoint", "--json", expect=0).stdout)

    assert report["seq"] == 2 and report["trees"][0]["files_changed"] == 1
    assert report["warnings"] == []   # once per path: an unchanged file is not read again
    assert set(far.entries("codex")) >= {"future.txt", "past.txt", "touched.txt", "later.txt"}
    assert json.loads(far.run("checkpoint", "--json", expect=0).stdout)["seq"] is None   # idle


def test_a_file_with_a_clamped_time_restores_with_that_time(far, root):
    far.run("checkpoint", expect=0)
    out = root / "out"

    proc = far.run("restore", "--to", str(out), expect=0)

    assert "Traceback" not in proc.stderr
    for name, ns in [("future.txt", MTIME_MAX), ("past.txt", MTIME_MIN), ("touched.txt", MTIME_MAX)]:
        assert (out / "codex" / name).read_bytes() == (far.codex / name).read_bytes()
        assert os.stat(out / "codex" / name).st_mtime_ns == ns
    hot = far.run("restore", "--json", expect=0)
    assert json.loads(hot.stdout)["trees"][0]["actions"] == {"same": 4}
    after = json.loads(far.run("checkpoint", "--json", expect=0).stdout)
    assert after["seq"] is None and after["warnings"] == []   # the hot restore found them as stored


def test_signatures_of_far_times_are_stored_clamped(far):
    """The local state and the quiet snapshot hold signatures as msgpack and marshal
    integers: a time they cannot hold never reaches them."""
    db = far.codex / "state.db"
    db.write_bytes(b"")
    _set_time(db, FAR_FUTURE)

    assert signature(os.lstat(far.codex / "future.txt"))[1] == MTIME_MAX
    assert signature(os.lstat(far.codex / "past.txt"))[1] == MTIME_MIN
    assert live_signature(str(db))[1] == MTIME_MAX


def test_each_kind_of_signature_names_its_fields_and_equals_the_tuple_it_is_stored_as(root):
    from journal.signatures import NO_WAL, DbSignature, DirSignature, Signature, dir_signature

    path = root / "notes.txt"
    path.write_bytes(b"x" * 10)
    st = os.lstat(path)
    sig = Signature.of(signature(st))
    assert (sig.size, sig.mtime_ns, sig.ino, sig.mode) == (10, st.st_mtime_ns, st.st_ino, st.st_mode)
    assert sig == signature(st) == Signature(10, st.st_mtime_ns, st.st_ino, st.st_mode)

    folder = dir_signature(os.lstat(root))
    assert isinstance(folder, DirSignature) and folder == (0, 0, 0, folder.mode)

    db = root / "state.db"
    db.write_bytes(b"\0" * 4096)
    alone = live_signature(str(db))
    assert isinstance(alone, DbSignature) and (alone.size, alone.wal_size, alone.wal_stamp) == (4096, *NO_WAL)
    (root / "state.db-wal").write_bytes(b"w" * 100)
    with_wal = DbSignature.of(tuple(live_signature(str(db))))
    assert with_wal.wal_size == 100 and with_wal.wal_stamp not in NO_WAL
