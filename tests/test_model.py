"""Every field of a stored structure is checked when it is decoded: a crafted value is a
damaged object (a corrupt page, an unreadable manifest), never a crash."""

from __future__ import annotations

import msgspec
import pytest

from conftest import Audit
from journal.cli.app import EXIT_FALLBACK
from journal.errors import CorruptObject
from journal.format.index import decode_page
from journal.format.model import KIND_DIR, KIND_SQLITE, KIND_SYMLINK, Entry, Page, TreeRoot, encode
from journal.verify import CORRUPT_PAGE, TORN_MANIFEST

NOT_HEX = "../" * 21 + "x"   # 64 characters, none of them a hex digit


@pytest.fixture
def stored(live):
    """Checkpoint 1 of the fixture trees: the good copy a restore falls back to."""
    live.checkpoint()
    return live


def ref_of(entry: Entry, **fields):
    return msgspec.structs.replace(entry.refs[0], **fields)


# Each would end in a traceback (pack_key, store.get, os.symlink) or go unnoticed before.
CRAFTED = {
    "negative offset": (lambda e: {"refs": (ref_of(e, offset=-5),)}, "Expected `int` >= 0"),
    "pack ../../x": (lambda e: {"refs": (ref_of(e, pack="../../x"),)}, "names pack '../../x', which is not a pack"),
    "empty pack in an entry": (lambda e: {"refs": (ref_of(e, pack=""),)}, "names pack '', which is not a pack"),
    "id that is not hex": (lambda e: {"refs": (ref_of(e, id=NOT_HEX),)}, "which is not a blob id"),
    "size past its blobs": (lambda e: {"size": 100}, "says 100 bytes, its blobs hold 6"),
    "symlink without a target": (lambda e: {"kind": KIND_SYMLINK, "refs": ()}, "a symlink needs a target"),
}


@pytest.mark.parametrize("name", CRAFTED)
def test_a_crafted_entry_makes_its_tree_fall_back(stored, make_live, name):
    change, detail = CRAFTED[name]
    good = stored.chunk_entry("config.toml")
    entry = msgspec.structs.replace(good, **change(good))
    (root,) = stored.put_pages(Page(level=0, entries=(entry,)))
    stored.publish({"codex": TreeRoot(root=root, files=1, bytes=entry.size)})

    Audit(stored, make_live).assert_falls_back(CORRUPT_PAGE, detail)


@pytest.mark.parametrize("fields,detail", [
    ({"kind": "device"}, "Invalid enum value 'device'"),
    ({"mode": 0o170777}, "Expected `int` <= 4095"),
    ({"size": -1}, "Expected `int` >= 0"),
    ({"mtime_ns": 1 << 70}, "Expected `int` <= 9223372036854775807"),
    ({"target": "elsewhere"}, "a symlink needs a target, and only a symlink has one"),
    ({"kind": KIND_SYMLINK, "refs": (), "size": 0, "target": "a\0b"}, "holds a NUL"),
    ({"kind": KIND_DIR, "size": 0}, "a dir names 1 blobs"),
    ({"kind": KIND_SQLITE, "size": 0, "refs": ()}, "a snapshot names 0 page maps"),
    ({"bases": (None, None)}, "names 2 chunk bases for 1 file blobs"),
    ({"refs": "length"}, "Expected `int` >= 56"),
    ({"refs": "size"}, "Expected `int` <= 268435456"),
])
def test_every_entry_field_is_checked_when_its_page_is_decoded(live, fields, detail):
    good = live.chunk_entry("a")
    if fields.get("refs") == "length":
        fields = {"refs": (ref_of(good, length=10),)}
    elif fields.get("refs") == "size":
        fields = {"refs": (ref_of(good, size=1 << 31),), "size": 1 << 31}
    page = encode(Page(level=0, entries=(msgspec.structs.replace(good, **fields),)))

    with pytest.raises(CorruptObject, match=detail.replace("(", r"\(")):
        decode_page(page, "page")


def test_a_manifest_whose_tree_root_names_no_pack_is_skipped(stored, make_live):
    """An empty pack means "the same pack" inside an index pack only: a root has none."""
    root = stored.repo().load_manifest(1)[0].trees["codex"].root
    stored.publish({"codex": TreeRoot(root=msgspec.structs.replace(root, pack=""), files=1, bytes=1)})

    audit = Audit(stored, make_live)

    assert audit.verify.returncode == 1
    assert [(f["kind"], f["manifest"]) for f in audit.findings] == [(TORN_MANIFEST, 2)]
    assert "tree 'codex': root page names pack ''" in audit.findings[0]["detail"]
    assert audit.restore.returncode == EXIT_FALLBACK and "restored from checkpoint 1" in audit.restore.stdout
    assert "skipping manifest 2" in audit.restore.stderr


@pytest.mark.parametrize("fields,detail", [
    ({"packs": ("../../x",)}, "Expected `str` of length >= 64"),
    ({"packs": (NOT_HEX,)}, "names pack '../../../"),
    ({"host": "evil\nhost"}, "Expected `str` matching regex"),
    ({"seq": -2}, "Expected `int` >= 0")])
def test_a_manifest_field_out_of_range_makes_the_manifest_unreadable(stored, make_live, fields, detail):
    stored.publish({}, **fields)

    audit = Audit(stored, make_live)

    assert audit.verify.returncode == 1
    assert [(f["kind"], f["manifest"]) for f in audit.findings] == [(TORN_MANIFEST, 2)]
    assert detail in audit.findings[0]["detail"]
    assert audit.restore.returncode == EXIT_FALLBACK and "skipping manifest 2" in audit.restore.stderr

