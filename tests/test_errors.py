"""Error messages: every ``OSError`` of a local file names the path and a hint fitting its errno."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from conftest import Live, one_line_error
from journal.errors import RestoreIncomplete, describe_os_error, mount_point, naming


@pytest.mark.parametrize("code, hint", [
    (errno.ENOSPC, "free space on the filesystem mounted at {mount}"),
    (errno.EDQUOT, "free space on the filesystem mounted at {mount} or raise your disk quota there"),
    (errno.EACCES, "check the permissions of {path} and of the directories above it (journal runs as uid {uid})"),
    (errno.EPERM, "check the permissions of {path} and of the directories above it (journal runs as uid {uid})"),
    (errno.EROFS, "the filesystem mounted at {mount} is read-only; remount it read-write"),
    (errno.EIO, "the device reported an I/O error; check the disk and the kernel log (dmesg)"),
    (errno.ENAMETOOLONG, "the path is longer than the system allows (4096 bytes, or 255 for one name); shorten it"),
    (errno.ELOOP, "too many levels of symbolic links on that path; fix the links"),
    (errno.ENOTDIR, "a file stands where a directory belongs; move it aside"),
    (errno.EISDIR, "a directory stands where a file belongs; move it aside"),
    (errno.EMFILE, "too many open files; raise the limit (ulimit -n)"),
    (errno.ENOENT, "it does not exist; create it or fix the path"),
    (errno.EEXIST, "it already exists; move it aside"),
    (errno.EINVAL, "check that path"),
])
def test_an_os_error_names_the_path_and_a_hint_fitting_its_errno(tmp_path, code, hint):
    path = str(tmp_path / "store" / "packs" / "ab")
    err = OSError(code, os.strerror(code))

    with pytest.raises(OSError) as raised, naming(path):
        raise err

    mount = mount_point(str(tmp_path))
    assert describe_os_error(raised.value) == \
        f"{path}: {os.strerror(code)}; " + hint.format(mount=mount, path=path, uid=os.getuid())


def test_mount_point_is_the_top_of_the_filesystem_holding_a_path(small_tmpfs):
    disk = small_tmpfs("64k")
    (disk / "a" / "b").mkdir(parents=True)

    assert mount_point(str(disk / "a" / "b" / "not-yet")) == str(disk)
    assert mount_point(str(disk)) == str(disk)
    assert mount_point("/") == "/"


def test_a_store_on_a_read_only_bind_mount_names_that_mount_not_the_disk_under_it(tmp_path):
    """A directory bind-mounted read-only is on the same device as the filesystem it is
    a directory of: the error names the bind mount (from ``/proc/self/mountinfo``), the
    one to remount, not the top of that filesystem."""
    point = tmp_path / "bound"
    point.mkdir()
    live = Live(tmp_path / "a", point / "store")
    live.write("codex-home/a.txt", "a\n")
    live.run("init", expect=0)
    for how in (["--bind", str(point), str(point)], ["-o", "remount,ro,bind", str(point)]):
        done = subprocess.run(["mount", *how], capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(point)], capture_output=True)
            pytest.skip(f"cannot make a read-only bind mount here (needs CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        line = one_line_error(live.run("checkpoint", expect=1))
    finally:
        subprocess.run(["umount", str(point)], check=True)

    assert "Read-only file system" in line
    assert line.endswith(f"the filesystem mounted at {point} is read-only; remount it read-write"), line


def test_naming_keeps_the_file_an_error_already_names(tmp_path):
    with pytest.raises(OSError) as raised, naming(str(tmp_path / "other")):
        os.open(tmp_path / "missing" / "file", os.O_RDONLY)

    assert raised.value.filename == str(tmp_path / "missing" / "file")


def test_an_incomplete_restore_says_which_paths_are_too_long_to_create_apart_from_damage():
    both = str(RestoreIncomplete(["sessions/a.jsonl"], ["d/leaf.md"]))
    too_long = str(RestoreIncomplete([], ["d/leaf.md"]))

    assert both == ("restore: 1 file(s) have no good copy in any manifest: sessions/a.jsonl; run `journal verify "
                    "--full` to see which objects are damaged; 1 path(s) are too long to create here: d/leaf.md; "
                    "shorten the tree's directory, or export with `journal restore --to` a shorter DIR")
    assert too_long.startswith("restore: 1 path(s) are too long to create here: d/leaf.md;")
    assert "no good copy" not in too_long and "verify" not in too_long
