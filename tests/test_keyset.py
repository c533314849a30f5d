"""Key changes under concurrency (design §22, "The key set"): every change claims the
next key set, so two `journal key remove` runs racing each other never leave the store
without a key.

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

import pytest

from conftest import Live, clean_env, one_line_error
from journal.config import KeySource
from journal.crypto.keys import Secret, wrap
from journal.format.model import encode
from journal.repository.repository import Repository

pytest_plugins = ["tests.s3server"]

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
    ``others`` more (a team's keys: every key change reads them all), put as they are
    (a local store's files written directly, unsynced: only the setup is faster): the
    container, A's and B's key files, and their ids."""
    files = {"A": tmp_path / "a.key", "B": tmp_path / "b.key"}
    live = Live(tmp_path / "home", store, env={"JOURNAL_KEY_FILE": str(files["A"]), **(env or {})})
    live.run("init", "--encrypt", "--key-file", str(files["A"]), expect=0)
    ids = {"A": next(iter(live.store.list("keys/"))).removeprefix("keys/")}   # the only key yet
    files["B"].write_bytes(os.urandom(32))
    repo = Repository.open(live.store, key=KeySource(file=str(files["A"]), origin="test"))
    for i in range(1 + others):
        secret = Secret("hkdf-sha256", files["B"].read_bytes() if i == 0 else os.urandom(32), "test")
        kid, data = uuid.uuid4().hex, encode(wrap(repo.codec, secret, repo.store_id, "2026-01-01"))
        if live.store_path is not None:
            (live.store_path / "keys" / kid).write_bytes(data)
        else:
            live.store.put_if_absent(f"keys/{kid}", data)
        ids.setdefault("B", kid)
    return live, files, ids


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
    assert len([p for p in (tmp_path / "store" / "keys").iterdir() if not p.name.startswith("set-")]) == 2 + LOCAL_OTHERS


def test_two_holders_removing_each_others_key_at_once_on_s3_leave_one_key(tmp_path, s3_server, s3_url):
    live, files, ids = keyed_live(tmp_path, s3_url, env=s3_server.env, others=S3_OTHERS)
    remove_each_other(live, files, ids, 2, S3_OTHERS)
