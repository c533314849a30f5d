"""Encrypted stores (design §22): a store that reveals nothing without its key.

Every test runs the real CLI in subprocesses on real files (a local store, the hf-mount
rules simulator, moto's S3): `journal init --encrypt`, checkpoints of the real
transcripts with a marker planted in a transcript and in a file name, and every
command that reads payloads, with the right key, a wrong one, none, a tampered object,
and `cryptography` missing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import Live, clean_env, one_line_error, run_journal
from journal.checkpoint.capture import AHEAD_FILE, CHUNK
from journal.format.model import StoreInfo
from journal.repository.repository import seal_config
from journal.store import open_store

pytest_plugins = ["tests.s3server"]

MARKER = "ZEBRA-SECRET-7f3a9c"
SECRET_FILE = f"codex-home/notes-{MARKER}.txt"
TRANSCRIPT = "codex-home/sessions/2026/02/23/rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
#: Every command that reads payloads, as the wrong-key and no-key tests run it.
READERS = (("ls", "codex"), ("cat", "codex/auth.json"), ("diff", "1", "2"), ("log",), ("verify",),
           ("restore", "--dry-run"), ("gc", "--keep-last", "1", "--dry-run"), ("key", "list"))


def stored(store_url: str) -> dict[str, bytes]:
    """Every object of the store, by key."""
    store = open_store(store_url)
    return {key: store.get(key) for key in store.list("")}


def encrypted_live(tmp_path: Path, store: str | Path | None = None, env: dict | None = None, **kwargs) -> Live:
    """A container on a new encrypted store, its key file ``tmp_path/store.key``
    (``$JOURNAL_KEY_FILE``), its live trees the real transcripts plus the marker."""
    key = tmp_path / "store.key"
    live = Live(tmp_path / "a", store if store is not None else tmp_path / "store", fixtures=True,
                env={"JOURNAL_KEY_FILE": str(key), **(env or {})}, **kwargs)
    made = live.run("init", "--encrypt", "--key-file", str(key), "--json", expect=0)
    assert json.loads(made.stdout)["encrypted"] is True
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    live.write(SECRET_FILE, f"api_key = {MARKER}\n")
    live.write("codex-home/auth.json", json.dumps({"OPENAI_API_KEY": MARKER}))
    live.append(TRANSCRIPT, json.dumps({"type": "message", "text": f"the password is {MARKER}"}) + "\n")
    return live


def assert_reveals_nothing(store_url: str) -> None:
    objects = stored(store_url)
    names = [MARKER, "notes-", "auth.json", "rollout-2026", "codex-home", "OPENAI_API_KEY", "password"]
    for key, data in objects.items():
        for name in names:
            assert name not in key, f"{name!r} in the key {key}"
            assert name.encode() not in data, f"{name!r} in the bytes of {key}"
    assert any(k.startswith("keys/") for k in objects) and any(k.startswith("packs/") for k in objects)


def full_cycle(live: Live) -> None:
    """checkpoint, browse, verify, gc, restore on the live trees: each succeeds and
    returns the planted bytes."""
    live.run("checkpoint", expect=0)
    live.append(TRANSCRIPT, json.dumps({"type": "message", "text": "second"}) + "\n")
    live.run("checkpoint", expect=0)
    assert "notes-" in live.run("ls", "codex", expect=0).stdout
    assert MARKER in live.run("cat", "codex/auth.json", expect=0).stdout
    assert "M" in live.run("diff", "1", "2", expect=0).stdout
    assert [e["seq"] for e in live.log()] == [2, 1]
    verified = json.loads(live.run("verify", "--full", "--json", expect=0).stdout)
    assert verified["ok"] and verified["blobs"] > 0
    live.run("gc", "--keep-last", "1", "--grace", "0", expect=0)
    live.run("gc", "--keep-last", "1", "--grace", "0", expect=0)
    assert [e["seq"] for e in live.log()] == [2]
    before = (live.local / TRANSCRIPT).read_bytes()
    for rel in (SECRET_FILE, TRANSCRIPT):
        (live.local / rel).unlink()
    live.run("restore", expect=0)
    assert (live.local / TRANSCRIPT).read_bytes() == before
    assert MARKER in (live.local / SECRET_FILE).read_text()
    assert json.loads(live.run("verify", "--full", "--json", expect=0).stdout)["ok"]


def test_full_cycle_on_an_encrypted_local_store_leaves_no_plaintext_in_it(tmp_path):
    live = encrypted_live(tmp_path)
    full_cycle(live)
    assert_reveals_nothing(live.store_url)
    config = json.loads((tmp_path / "store" / "config").read_bytes())
    assert (config["version"], config["encryption"]) == (2, "aes-256-gcm")


def test_a_large_file_read_and_verified_ahead_round_trips_on_an_encrypted_store(tmp_path):
    """A file past ``AHEAD_FILE`` is hashed and sealed by capture's threads and verified
    by restore's fetch threads: both with the store's keyed ids, so it restores whole
    and its bytes are nowhere in the store."""
    live = encrypted_live(tmp_path)
    data = os.urandom(AHEAD_FILE + 2 * CHUNK + 99) + f"tail {MARKER}".encode()
    big = live.local / "codex-home" / "weights.bin"
    big.write_bytes(data)
    live.run("checkpoint", expect=0)
    big.unlink()

    live.run("restore", expect=0)

    assert big.read_bytes() == data
    assert_reveals_nothing(live.store_url)


def test_full_cycle_on_the_hf_mount_rules_store(tmp_path):
    live = encrypted_live(tmp_path, f"hfsim://{tmp_path / 'hf'}")
    full_cycle(live)
    assert_reveals_nothing(live.store_url)


def test_full_cycle_on_moto_s3(tmp_path, s3_server, s3_url):
    live = encrypted_live(tmp_path, s3_url, env=s3_server.env)
    full_cycle(live)
    assert_reveals_nothing(s3_url)


def test_migrate_into_an_encrypted_store_checkpoints_and_verifies_it_sealed(tmp_path):
    legacy, old_home = tmp_path / "data" / "state", tmp_path / "data" / "home"
    (legacy / "codex").mkdir(parents=True)
    old_home.mkdir()
    (legacy / "codex" / "auth.json").write_text(json.dumps({"token": MARKER}))
    key = tmp_path / "store.key"
    live = Live(tmp_path / "a", tmp_path / "store", env={"JOURNAL_KEY_FILE": str(key)})
    live.run("init", "--encrypt", "--key-file", str(key), expect=0)
    done = live.run("migrate", "--legacy-root", str(legacy), "--old-home", str(old_home), expect=None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert MARKER in live.run("cat", "codex/auth.json", expect=0).stdout
    for name, data in stored(live.store_url).items():
        assert MARKER.encode() not in data, name


def test_unchanged_data_is_not_uploaded_again(tmp_path):
    """Keyed ids and derived nonces keep the plain store's dedup: a 2 MiB file read
    again (its mtime changed) costs index pages and the manifest, not its data; a copy
    under a new name seals to the same pack, under the same name, stored once."""
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    big = live.write("codex-home/big.bin", os.urandom(2 << 20))
    assert live.checkpoint_ok()["bytes_uploaded"] > 2 << 20
    os.utime(big, ns=(1, 1))
    assert live.checkpoint_ok()["bytes_uploaded"] < 16 << 10
    live.write("codex-home/big-copy.bin", big.read_bytes())
    assert live.checkpoint_ok()["bytes_uploaded"] < 16 << 10


def test_plain_store_is_unchanged_and_refuses_a_key(tmp_path):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True)
    live.run("checkpoint", expect=0)
    config = json.loads((tmp_path / "store" / "config").read_bytes())
    assert set(config) == {"format", "version", "store_id", "created", "checksum"} and config["version"] == 1
    assert not (tmp_path / "store" / "keys").exists()
    (tmp_path / "k").write_bytes(os.urandom(32))
    line = one_line_error(live.run("ls", env={"JOURNAL_KEY_FILE": str(tmp_path / "k")}, expect=2))
    assert "is not encrypted" in line and str(tmp_path / "k") in line
    line = one_line_error(live.run("init", "--encrypt", "--key-file", str(tmp_path / "k2"), expect=2))
    assert "not an encrypted one" in line


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_every_reader_names_the_key_source_when_the_key_is_wrong_or_missing(tmp_path, command):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    live.append(TRANSCRIPT, "{}\n")
    live.run("checkpoint", expect=0)
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(os.urandom(32))
    line = one_line_error(live.run(*command, env={"JOURNAL_KEY_FILE": str(wrong)}, expect=1))
    assert f"key file {wrong} (JOURNAL_KEY_FILE) opens none of the 1 key(s)" in line
    nokey = clean_env({k: v for k, v in live.env.items() if k != "JOURNAL_KEY_FILE"})
    line = one_line_error(run_journal(*command, env=nokey))
    assert "is encrypted and no key is set; set JOURNAL_KEY_FILE" in line
    gone = tmp_path / "gone.key"
    line = one_line_error(live.run(*command, env={"JOURNAL_KEY_FILE": str(gone)}, expect=2))
    assert f"read key: key file {gone} (JOURNAL_KEY_FILE) does not exist" in line


def test_a_checkpoint_with_the_wrong_key_writes_nothing(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    before = stored(live.store_url)
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(os.urandom(32))
    live.write("codex-home/new.txt", "new")
    line = one_line_error(live.run("checkpoint", env={"JOURNAL_KEY_FILE": str(wrong)}, expect=1))
    assert "opens none of the 1 key(s)" in line
    assert stored(live.store_url) == before


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_a_pack_is_damage_verify_reports_and_restore_never_writes(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    ref = live.entries("codex")[SECRET_FILE.removeprefix("codex-home/")].refs[0]
    flip(live.pack_file(ref.pack), ref.offset + ref.length // 2)
    found = json.loads(live.run("verify", "--full", "--json", expect=1).stdout)["findings"]
    assert any(f["kind"] == "corrupt-object" and "authentication tag" in f["detail"] for f in found), found
    (live.local / SECRET_FILE).unlink()
    done = live.run("restore", expect=None)
    assert done.returncode != 0 and "authentication tag" in done.stderr
    assert not (live.local / SECRET_FILE).exists()


def test_a_flipped_byte_in_a_manifest_is_a_torn_manifest(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    flip(tmp_path / "store" / "manifests" / "000000000001", 40)
    found = json.loads(live.run("verify", "--json", expect=1).stdout)["findings"]
    assert [(f["kind"], f["key"]) for f in found] == [("torn-manifest", "manifests/000000000001")]
    assert "authentication tag" in found[0]["detail"]
    assert live.run("restore", expect=None).returncode != 0


def test_a_changed_key_object_is_reported_and_named_when_no_key_opens(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("key", "add", env={"JOURNAL_NEW_PASSPHRASE": "correct horse"}, expect=0)
    keys = sorted(p for p in (tmp_path / "store" / "keys").iterdir() if not p.name.startswith("set-"))
    for path in keys:  # a byte of each object's time: it still decodes and unwraps
        text = path.read_text()
        at = text.index('"created":"') + len('"created":"') + 3
        path.write_text(text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1:])
    found = json.loads(live.run("verify", "--json", expect=1).stdout)["findings"]
    assert sorted((f["kind"], f["key"]) for f in found) == [("corrupt-key", f"keys/{p.name}") for p in keys]
    with_file = json.loads((tmp_path / "store" / "keys" / keys[0].name).read_text())["kdf"] == "hkdf-sha256"
    flip(keys[0 if with_file else 1], 2)  # the key file's own key object no longer decodes
    line = one_line_error(live.run("ls", expect=1))
    assert "opens none of the 2 key(s)" in line and "1 of them damaged" in line


def test_key_add_list_remove_rotate(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    first = json.loads(live.run("key", "list", "--json", expect=0).stdout)
    assert [(k["kind"], k["current"]) for k in first] == [("key file", True)]
    line = one_line_error(live.run("key", "remove", first[0]["id"], expect=2))
    assert "is the last key" in line
    second = tmp_path / "second.key"
    added = json.loads(live.run("key", "add", "--new-key-file", str(second), "--json", expect=0).stdout)
    assert added["key_file_created"] and second.stat().st_mode & 0o777 == 0o600
    with_second = {"JOURNAL_KEY_FILE": str(second)}
    assert MARKER in live.run("cat", "codex/auth.json", env=with_second, expect=0).stdout
    line = one_line_error(live.run("key", "remove", added["added"][:8], env=with_second, expect=2))
    assert "is the one this command opened" in line
    live.run("key", "remove", first[0]["id"][:6], env=with_second, expect=0)
    assert "opens none" in one_line_error(live.run("ls", expect=1))  # the first key file no longer opens it
    rotated = json.loads(live.run("key", "rotate", "--json", env={**with_second, "JOURNAL_NEW_PASSPHRASE": "pw 2"},
                                  expect=0).stdout)
    assert rotated["removed"] == added["added"]
    assert "opens none" in one_line_error(live.run("ls", env=with_second, expect=1))
    env = clean_env({**{k: v for k, v in live.env.items() if k != "JOURNAL_KEY_FILE"}, "JOURNAL_PASSPHRASE": "pw 2"})
    listed = json.loads(run_journal("key", "list", "--json", env=env).stdout)
    assert [(k["id"], k["kind"], k["current"]) for k in listed] == [(rotated["added"], "passphrase", True)]


def test_key_rotate_warns_that_a_running_supervisor_still_names_the_old_key(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    second, third = tmp_path / "second.key", tmp_path / "third.key"
    quiet = live.run("key", "rotate", "--new-key-file", str(second), expect=0)
    fd = os.open(live.state_dir / "supervise.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)                  # a supervisor runs on this state directory
        warned = live.run("key", "rotate", "--new-key-file", str(third), env={"JOURNAL_KEY_FILE": str(second)},
                          expect=0)
    finally:
        os.close(fd)

    assert "supervisor" not in quiet.stderr
    (line,) = [ln for ln in warned.stderr.splitlines() if "supervisor" in ln]
    assert line.startswith("warning: key rotate: a supervisor is running on ")
    assert f"the old key (key file {second}" in line and f"the new key (key file {third}" in line


def test_a_passphrase_store_round_trips_and_a_wrong_passphrase_is_one_line(tmp_path):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True, env={"JOURNAL_PASSPHRASE": "open sesame"})
    live.run("init", "--encrypt", expect=0)
    key = json.loads(next((tmp_path / "store" / "keys").iterdir()).read_text())
    assert key["kdf"] == "scrypt" and key["scrypt"] == {"n": 1 << 15, "r": 8, "p": 1}
    live.write(SECRET_FILE, MARKER)
    live.run("checkpoint", expect=0)
    (live.local / SECRET_FILE).unlink()
    live.run("restore", expect=0)
    assert (live.local / SECRET_FILE).read_text() == MARKER
    line = one_line_error(live.run("ls", env={"JOURNAL_PASSPHRASE": "open sesame!"}, expect=1))
    assert "the passphrase in $JOURNAL_PASSPHRASE opens none of the 1 key(s)" in line
    line = one_line_error(live.run("ls", env={"JOURNAL_PASSPHRASE": ""}, expect=2))
    assert "JOURNAL_PASSPHRASE is set but empty" in line


BLOCKED = ("import sys; sys.modules['cryptography'] = None; sys.argv[0] = 'journal'; "
           "from journal.cli.launch import main; sys.exit(main())")


def test_without_cryptography_an_encrypted_store_says_how_to_install_it(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    blocked = [sys.executable, "-c", BLOCKED]
    for command in (("ls",), ("restore", "--dry-run"), ("verify",)):
        line = one_line_error(live.run(*command, cmd=blocked, expect=1))
        assert "needs the `cryptography` package, which is not installed: pip install 'journal[crypto]'" in line
    line = one_line_error(Live(tmp_path / "b", tmp_path / "store2", cmd=blocked).run(
        "init", "--encrypt", "--key-file", str(tmp_path / "k"), expect=1))
    assert "pip install 'journal[crypto]'" in line
    plain = Live(tmp_path / "c", tmp_path / "plain", fixtures=True, cmd=blocked)
    plain.run("checkpoint", expect=0)
    plain.run("verify", "--full", expect=0)


def test_the_idle_tick_of_an_encrypted_store_imports_no_cryptography(tmp_path):
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    idle = live.run("checkpoint", cmd=[sys.executable, "-c", BLOCKED], expect=0)
    assert idle.stdout.startswith("idle: nothing changed"), idle.stdout


def test_an_init_that_stopped_before_its_config_leaves_a_location_a_new_init_takes(tmp_path):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True, env={"JOURNAL_KEY_FILE": str(tmp_path / "k")})
    live.run("init", "--encrypt", "--key-file", str(tmp_path / "k"), expect=0)
    (tmp_path / "store" / "config").unlink()  # as if killed between the key object and the config
    live.run("init", "--encrypt", expect=0)
    live.run("checkpoint", expect=0)
    found = json.loads(live.run("verify", "--json", expect=1).stdout)["findings"]
    assert [(f["kind"], "init that stopped" in f["detail"]) for f in found] == [("corrupt-key", True)]
    assert len(json.loads(live.run("key", "list", "--json", expect=0).stdout)) == 1
    regular = tmp_path / "file-store"
    regular.write_text("not a store")
    line = one_line_error(live.run("init", "--encrypt", "--store", str(regular), expect=1))
    assert f"{regular} is not empty and is not a journal store" in line and regular.read_text() == "not a store"


def swap_in_plain_config(store: Path) -> None:
    """Replace an encrypted store's config by a plain one with the same store id, as
    whoever can write the bucket could (design §22, "Downgrade")."""
    info = json.loads((store / "config").read_bytes())
    plain = StoreInfo(store_id=info["store_id"], created=info["created"])
    (store / "config").write_bytes(seal_config(plain))


def without_key(live: Live) -> dict[str, str]:
    return clean_env({k: v for k, v in live.env.items() if k != "JOURNAL_KEY_FILE"})


WRITERS = (("checkpoint",), ("restore",), ("gc", "--keep-last", "1"), ("takeover",),
           ("input", "append", "--harness", "codex", "--session", "s1", "-"))


@pytest.mark.parametrize("learned", ["checkpoint", "restore"])
def test_a_plain_config_swapped_into_a_known_encrypted_store_is_refused_and_nothing_is_written(tmp_path, learned):
    """The local state records that the store is encrypted, and with which key: once the
    config says plain, no command writes to it, with the key or without it, and no
    refusal says to drop the key."""
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    if learned == "restore":
        shutil.rmtree(live.state_dir)
        live.run("restore", expect=0)
    kid = json.loads(live.run("key", "list", "--json", expect=0).stdout)[0]["id"]
    swap_in_plain_config(tmp_path / "store")
    live.write("codex-home/new-secret.txt", f"second {MARKER}")
    before = stored(live.store_url)
    for command in WRITERS:
        done = run_journal(*command, env=without_key(live), stdin="a prompt")
        line = one_line_error(done)
        assert done.returncode == 1 and "config says it is not encrypted" in line, (command, line)
        assert f"this machine's local state knew it encrypted, opened with key {kid}" in line
        assert "unset" not in line
    line = one_line_error(live.run("checkpoint", expect=2))
    assert "is not encrypted" in line and "never writes a store in the clear while a key is set" in line
    assert "unset" not in line
    assert stored(live.store_url) == before


def test_a_new_container_without_a_key_refuses_a_plain_config_over_an_encrypted_store(tmp_path):
    """No local state: the store's own key objects show it was encrypted."""
    live = encrypted_live(tmp_path)
    live.run("checkpoint", expect=0)
    swap_in_plain_config(tmp_path / "store")
    before = stored(live.store_url)
    fresh = Live(tmp_path / "fresh", tmp_path / "store", fixtures=True)
    for command in (("input", "append", "--harness", "codex", "--session", "s1", "-"), ("restore",)):
        line = one_line_error(fresh.run(*command, stdin="a prompt", expect=1))
        assert "config says it is not encrypted, but it holds key object keys/" in line, line
    line = one_line_error(fresh.run("restore", env={"JOURNAL_KEY_FILE": str(tmp_path / "store.key")}, expect=2))
    assert "never writes a store in the clear while a key is set" in line and "unset" not in line
    assert stored(live.store_url) == before


def test_a_key_file_that_is_a_fifo_is_refused_in_one_line_without_blocking(tmp_path):
    live = encrypted_live(tmp_path)
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    for command in (("ls", "codex"), ("key", "add", "--new-key-file", str(fifo))):
        line = one_line_error(live.run(*command, env={"JOURNAL_KEY_FILE": str(fifo) if command[0] == "ls"
                                                      else str(tmp_path / "store.key")}, expect=2, timeout=20))
        assert f"read key: key file {fifo}" in line and "is a FIFO, not a regular file" in line, line
