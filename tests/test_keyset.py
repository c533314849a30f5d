"""Key changes (design §22, "The key set"): every change claims the next key set, so two
`journal key remove` runs racing each other never leave the store without a key; a key
object outside the newest set opens nothing; no change replaces the master key.

The racers are real `journal` processes on a real store (a local directory, moto's
S3). Each imports the CLI and the crypto modules first, says it is ready on a pipe,
then waits on a second pipe, so both start their command in the same instant: holder
of key A removes key B while holder of key B removes key A.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from conftest import Live, clean_env, one_line_error
from journal.config import KeySource
from journal.crypto.keys import Secret, read_key_object, unwrap, wrap
from journal.format.model import encode
from journal.repository.repository import Repository

pytest_plugins = ["tests.s3server"]

ROOT = Path(__file__).resolve().parent.parent

#: A `journal` process that starts its command only when the test says go.
RACER = """
import os, sys
import cryptography.hazmat.primitives.ciphers.aead, cryptography.hazmat.primitives.kdf.hkdf
import journal.cli.entry, journal.cli.keys, journal.crypto.keys, journal.repository.repository
if os.environ.get("AWS_ACCESS_KEY_ID"):
    import boto3, journal.store.cloud
from journal.cli.launch import main
os.write(int(os.environ["RACE_READY"]), b"r")
os.read(int(os.environ["RACE_GO"]), 1)
sys.argv[0] = "journal"
sys.exit(main())
"""
#: More keys than A and B: a key change reads them all, which widens the moment between
#: its read of the keys and its write (the race the key set closes) past the jitter of
#: two processes' start; an S3 request takes longer than a local read, so fewer do.
LOCAL_OTHERS, S3_OTHERS = 300, 10


def keyed_live(tmp_path: Path, store: str | Path, env: dict | None = None, others: int = 0
               ) -> tuple[Live, dict[str, Path], dict]:
    """An encrypted store with two keys, A (``a.key``, its creator) and B (``b.key``), and
    ``others`` more (a team's keys: every key change reads them all): the container,
    A's and B's key files, and their ids."""
    files = {"A": tmp_path / "a.key", "B": tmp_path / "b.key"}
    live = Live(tmp_path / "home", store, env={"JOURNAL_KEY_FILE": str(files["A"]), **(env or {})})
    live.run("init", "--encrypt", "--key-file", str(files["A"]), expect=0)
    ids = {"A": next(iter(live.store.list("keys/"))).removeprefix("keys/")}   # the only key yet
    files["B"].write_bytes(os.urandom(32))
    ids["B"] = put_keys(live, files["A"], [files["B"].read_bytes(), *(os.urandom(32) for _ in range(others))])[0]
    return live, files, ids


def put_keys(live: Live, opener: Path, secrets: list[bytes]) -> list[str]:
    """Key objects for the key files ``secrets``, put as they are, in no key set (a local
    store's files written directly, unsynced: only the setup is faster); their ids."""
    repo = Repository.open(live.store, key=KeySource(file=str(opener), origin="test"))
    ids = []
    for secret in secrets:
        kid = uuid.uuid4().hex
        data = encode(wrap(repo.codec, Secret("hkdf-sha256", secret, "test"), repo.store_id, "2026-01-01"))
        if live.store_path is not None:
            (live.store_path / "keys" / kid).write_bytes(data)
        else:
            live.store.put_if_absent(f"keys/{kid}", data)
        ids.append(kid)
    return ids


def add_key(live: Live, opener: Path, new: Path) -> str:
    """`journal key add --new-key-file NEW`, the store opened with ``opener``: the new key's id."""
    done = live.run("key", "add", "--new-key-file", str(new), "--json", env={"JOURNAL_KEY_FILE": str(opener)},
                    expect=0)
    return json.loads(done.stdout)["added"]


def race(live: Live, commands: list[tuple[Path, list[str]]]) -> list[subprocess.CompletedProcess]:
    """Run each ``(key file, args)`` as a `journal` process, all let go at once."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    procs = []
    try:
        for key, args in commands:
            env = clean_env({**live.env, "JOURNAL_KEY_FILE": str(key), "RACE_READY": str(ready_w),
                             "RACE_GO": str(go_r)})
            procs.append(subprocess.Popen([sys.executable, "-c", RACER, *args], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, pass_fds=(ready_w, go_r)))
        for _ in procs:
            assert os.read(ready_r, 1) == b"r"
        os.write(go_w, b"g" * len(procs))
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [subprocess.CompletedProcess(p.args, p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def remove_each_other(live: Live, files: dict[str, Path], ids: dict[str, str], rounds: int, others: int) -> None:
    """``rounds`` times: A's holder removes B while B's holder removes A, at once.
    Exactly one succeeds, the other is refused in one line, and the survivor's key
    still opens the store, which gets the removed key back for the next round. Then
    the store holds every key but none twice."""
    for _ in range(rounds):
        done = race(live, [(files["A"], ["key", "remove", ids["B"]]), (files["B"], ["key", "remove", ids["A"]])])
        won = [who for who, proc in zip("AB", done) if proc.returncode == 0]
        assert len(won) == 1, [(p.returncode, p.stdout, p.stderr) for p in done]
        survivor, lost = won[0], "B" if won[0] == "A" else "A"
        refused = one_line_error(done["AB".index(lost)])
        assert "nothing was changed" in refused or "opens none" in refused, refused
        ids[lost] = add_key(live, files[survivor], files[lost])   # opens the store with the survivor
    listed = json.loads(live.run("key", "list", "--json", expect=0).stdout)
    assert sorted(k["id"] for k in listed if k["id"] in (ids["A"], ids["B"])) == sorted((ids["A"], ids["B"]))
    assert len(listed) == 2 + others


def test_two_holders_removing_each_others_key_at_once_leave_one_key(tmp_path):
    live, files, ids = keyed_live(tmp_path, tmp_path / "store", others=LOCAL_OTHERS)
    remove_each_other(live, files, ids, 2, LOCAL_OTHERS)
    objects = [p for p in (tmp_path / "store" / "keys").iterdir() if not p.name.startswith("set-")]
    assert len(objects) == 2 + LOCAL_OTHERS   # the removed ones deleted


def test_two_holders_removing_each_others_key_at_once_on_s3_leave_one_key(tmp_path, s3_server, s3_url):
    live, files, ids = keyed_live(tmp_path, s3_url, env=s3_server.env, others=S3_OTHERS)
    remove_each_other(live, files, ids, 2, S3_OTHERS)


def key_findings(live: Live) -> list[tuple[str, str, str]]:
    """``journal verify``'s findings about ``keys/``: (severity, key, detail)."""
    done = live.run("verify", "--json", expect=None)
    return [(f["severity"], f["key"], f["detail"]) for f in json.loads(done.stdout)["findings"]
            if f["kind"] == "corrupt-key"]


def test_a_key_object_no_key_set_names_opens_nothing_and_key_remove_deletes_it(tmp_path):
    """A `key add` that stopped before its claim: its object is in no set."""
    live, files, ids = keyed_live(tmp_path, tmp_path / "store")
    ids["C"] = add_key(live, files["A"], tmp_path / "c.key")   # claims set 1: A, B and C
    stray = tmp_path / "stray.key"
    stray.write_bytes(os.urandom(32))
    [kid] = put_keys(live, files["A"], [stray.read_bytes()])
    assert "opens none of the 3 key(s)" in one_line_error(live.run("ls", env={"JOURNAL_KEY_FILE": str(stray)},
                                                                   expect=1))
    assert key_findings(live) == [("warning", f"keys/{kid}", f"is in no key set (a `journal key add` or `rotate` "
                                   f"that stopped before naming it): it opens nothing; `journal key remove {kid}` "
                                   "deletes it")]
    live.run("key", "remove", kid[:8], expect=0)
    assert not (tmp_path / "store" / "keys" / kid).exists() and key_findings(live) == []


def test_a_removed_key_whose_object_is_still_there_opens_nothing_until_the_next_change_deletes_it(tmp_path):
    """A `key remove` that stopped after its claim, before deleting the object."""
    live, files, ids = keyed_live(tmp_path, tmp_path / "store")
    kept = (tmp_path / "store" / "keys" / ids["B"]).read_bytes()
    live.run("key", "remove", ids["B"], expect=0)
    (tmp_path / "store" / "keys" / ids["B"]).write_bytes(kept)
    assert "opens none of the 1 key(s)" in one_line_error(live.run("ls", env={"JOURNAL_KEY_FILE": str(files["B"])},
                                                                   expect=1))
    [(severity, key, detail)] = key_findings(live)
    assert (severity, key) == ("warning", f"keys/{ids['B']}") and "was removed by key set 1" in detail
    add_key(live, files["A"], tmp_path / "c.key")
    assert not (tmp_path / "store" / "keys" / ids["B"]).exists() and key_findings(live) == []


def test_a_damaged_key_set_refuses_key_changes_and_verify_names_it(tmp_path):
    live, files, ids = keyed_live(tmp_path, tmp_path / "store")
    live.run("key", "remove", ids["B"], expect=0)
    newest = tmp_path / "store" / "keys" / "set-000000000001"
    data = newest.read_bytes()   # a byte of its check: it still decodes
    newest.write_bytes(data[:-3] + (b"0" if data[-3:-2] != b"0" else b"1") + data[-2:])
    line = one_line_error(live.run("key", "add", "--new-key-file", str(tmp_path / "c.key"), expect=2))
    assert "the newest key set keys/set-000000000001" in line and "nothing was changed" in line, line
    assert [(s, k) for s, k, _d in key_findings(live)] == [("error", "keys/set-000000000001")]
    live.run("ls", expect=0)   # the store still opens with its key


def test_key_rotate_keeps_the_master_key_as_the_docs_say(tmp_path):
    """A rotated-away key with a copy of its old key object still unwraps the master
    key that seals every object: rotate never changes it (design §22, "A key change
    never changes the master key"; README), and journal has no in-place re-key."""
    live, files, ids = keyed_live(tmp_path, tmp_path / "store")
    old_object = (tmp_path / "store" / "keys" / ids["A"]).read_bytes()
    rotated = json.loads(live.run("key", "rotate", "--new-key-file", str(tmp_path / "new.key"), "--json",
                                  expect=0).stdout)
    assert rotated["removed"] == ids["A"] and not (tmp_path / "store" / "keys" / ids["A"]).exists()
    store_id = Repository.open(live.store, key=KeySource(file=str(tmp_path / "new.key"), origin="t")).store_id
    masters = [unwrap(read_key_object(data, "copy"), Secret("hkdf-sha256", key.read_bytes(), "t"), store_id)
               for data, key in ((old_object, files["A"]),
                                 ((tmp_path / "store" / "keys" / rotated["added"]).read_bytes(), tmp_path / "new.key"))]
    assert masters[0] is not None and masters[0] == masters[1]
    readme = (ROOT / "README.md").read_text()
    design = (ROOT / "docs" / "design.md").read_text()
    assert "A key change never changes the master key." in readme
    assert "**A key change never changes the master key.**" in design and "journal has no re-key" in design
