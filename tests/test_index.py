"""Reading a tree index from a crafted store: every path once and in order, counts that
add up, or the tree is corrupt; verify, restore and gc stay bounded either way."""

from __future__ import annotations

import pytest

from conftest import Audit
from journal.format.model import KIND_DIR, Entry, Page, PageRef, TreeRoot
from journal.verify import CORRUPT_PAGE, UNSAFE_PATH


@pytest.fixture
def stored(live):
    """Checkpoint 1 of the fixture trees: the good copy a restore falls back to."""
    live.checkpoint()
    return live


def test_pages_naming_one_child_a_billion_times_are_refused_at_the_second_name(stored, make_live):
    """Three levels of 1,000 children naming one page each (distinct first paths, so
    each page alone looks sound) spell out 10^9 entries: verify and restore ran without
    end and restore's memory grew without bound. A child's paths must lie before its
    next sibling's, so the walk stops at the second child and reads each page once."""
    (inner,) = stored.put_pages(Page(level=0, entries=(stored.chunk_entry("x0000"),)))
    for level, count in ((1, 1), (2, 1000), (3, 1000 * 1000)):
        (inner,) = stored.put_pages(Page(level=level, children=tuple(
            PageRef(f"x{i:04d}", inner, count, 6 * count) for i in range(1000))))
    stored.publish({"codex": TreeRoot(root=inner, files=10 ** 9, bytes=6 * 10 ** 9)})

    Audit(stored, make_live).assert_falls_back(
        CORRUPT_PAGE, "the page spans 'x0000' to 'x0999', its parent says from 'x0000' to before 'x0001'",
        gc_blocked=False)


def test_a_child_page_whose_paths_overlap_its_sibling_is_refused(stored, make_live):
    """Two leaves both holding 'a': each page is in order, the tree is not."""
    first, second = stored.put_pages(Page(level=0, entries=(stored.chunk_entry("a"),)),
                                     Page(level=0, entries=(stored.chunk_entry("a", b"other\n"),)))
    (root,) = stored.put_pages(Page(level=1, children=(PageRef("a", first, 1, 6), PageRef("b", second, 1, 6))))
    stored.publish({"codex": TreeRoot(root=root, files=2, bytes=12)})

    Audit(stored, make_live).assert_falls_back(CORRUPT_PAGE, "its parent says from 'b'", gc_blocked=False)


@pytest.mark.parametrize("files,nbytes,detail", [
    (1, 12, "more than the 1 files its manifest says"),
    (3, 12, "holds 2 files of 12 bytes, its manifest says 3 of 12"),
    (2, 13, "holds 2 files of 12 bytes, its manifest says 2 of 13")])
def test_a_tree_whose_totals_differ_from_its_manifest_is_refused(stored, make_live, files, nbytes, detail):
    entries = [stored.chunk_entry("a.txt"), stored.chunk_entry("b.txt"), Entry(path="d", kind=KIND_DIR, mode=0o755)]
    stored.publish({"codex": TreeRoot(root=stored.put_tree(entries), files=files, bytes=nbytes)})

    Audit(stored, make_live).assert_falls_back(CORRUPT_PAGE, detail, gc_blocked=False)


def test_a_page_whose_declared_count_is_wrong_is_refused(stored, make_live):
    (leaf,) = stored.put_pages(Page(level=0, entries=(stored.chunk_entry("a"), stored.chunk_entry("b"))))
    (root,) = stored.put_pages(Page(level=1, children=(PageRef("a", leaf, 3, 12),)))
    stored.publish({"codex": TreeRoot(root=root, files=2, bytes=12)})

    Audit(stored, make_live).assert_falls_back(
        CORRUPT_PAGE, "the page holds 2 entries of 12 bytes, its parent says 3 of 12", gc_blocked=False)


@pytest.mark.parametrize("twin", ["directory", "file"])
def test_a_path_listed_twice_is_refused(stored, make_live, twin):
    """A file and a directory of the same name, or one file twice."""
    other = Entry(path="a", kind=KIND_DIR, mode=0o755) if twin == "directory" else stored.chunk_entry("a", b"again\n")
    entries = [stored.chunk_entry("a"), other]
    files = sum(e.kind != KIND_DIR for e in entries)
    stored.publish({"codex": TreeRoot(root=stored.put_tree(entries), files=files, bytes=6 * files)})

    Audit(stored, make_live).assert_falls_back(CORRUPT_PAGE, "entry 'a' is listed twice or out of order")


def test_an_entry_inside_a_file_entry_is_refused(stored, make_live):
    """'a' a file and 'a/b' another: no restore could put both on disk. 'a/b' alone is
    refused (the path rule, design §8), as an entry through a symlink entry is."""
    entries = [stored.chunk_entry("a"), stored.chunk_entry("a/b")]
    stored.publish({"codex": TreeRoot(root=stored.put_tree(entries), files=2, bytes=12)})

    audit = Audit(stored, make_live)

    assert audit.verify.returncode == 1
    assert [(f["kind"], f["manifest"], f["key"]) for f in audit.findings] == [(UNSAFE_PATH, 2, "codex/a/b")]
    assert "it is inside the file entry 'a', not a directory" in audit.findings[0]["detail"]
    assert audit.restore.returncode == 1
    assert "codex: LOST a/b: refused: it is inside the file entry 'a'" in audit.restore.stdout
    assert (audit.fresh.local / "codex-home" / "a").read_bytes() == b"hello\n"
