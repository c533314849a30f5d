"""The input journal (``journal/inputs/log.py``, ``journal/format/inputs.py``; design §20):
append, list, show, mark delivered, the sequence protocol and client-id claims, run as
real processes on a local store, the hf-mount rules store and moto's S3 server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from journal.errors import ConfigError
from journal.inputs.log import InputLog
from journal.repository.repository import Repository
from journal.store import open_store
from journal.format.inputs import (INPUT_PREFIX, claim_key, delivery_key, input_key, parse_id, parse_key,
                                   session_dir)
from journal.format.objects import KIND_INPUT, encode_record
from journal.store.base import check_key
from journal.verify import verify

from conftest import Live, clean_env, container_env, run_journal, wait_for
from tripwire import write_tripwire

pytest_plugins = ["tests.s3server"]

#: A child that appends once, at the parent's word: every child is ready (imported and
#: holding an open store) before any of them appends, so they really race.
APPENDER = r'''
import os, sys
from journal.config import load_config
from journal.inputs.log import open_log
start, harness, session, client_id, text = int(sys.argv[1]), *sys.argv[2:6]
log = open_log(load_config(), create=True)
print("ready", flush=True)
os.read(start, 1)
done = log.append(harness, session, text.encode(), client_id=client_id or None)
print(done.id, done.seq, done.duplicate, flush=True)
'''


class Stores:
    """One store URL and the environment that reaches it, for the CLI and children."""

    def __init__(self, url: str, tmp: Path, extra_env: dict | None = None):
        self.url = url
        self.tmp = tmp
        self.extra_env = extra_env or {}

    def container(self, name: str) -> dict:
        """The environment of one "container" on this store: its own local root and state."""
        local = self.tmp / name / "local"
        local.mkdir(parents=True, exist_ok=True)
        return container_env(local, self.url, self.tmp / name, **self.extra_env)

    def run(self, *args: str, env: dict | None = None, stdin: bytes | None = None, expect: int = 0):
        proc = run_journal(*args, env=env or self.container("a"), stdin=stdin, text=False, timeout=120)
        assert proc.returncode == expect, f"journal {' '.join(args)} -> {proc.returncode}\n{proc.stderr.decode()}"
        return proc

    def inputs(self, *args: str, env: dict | None = None) -> list[dict]:
        return json.loads(self.run("input", "list", "--json", *args, env=env).stdout)

    def log(self) -> InputLog:
        """The store's input journal, opened in this process (to look, not to race)."""
        return InputLog(Repository.open(open_store(self.url)))


@pytest.fixture(params=["local", "hfsim", "s3"])
def stores(request, tmp_path) -> Stores:
    return _stores(request, tmp_path)


@pytest.fixture(params=["local", "s3"])
def shared_stores(request, tmp_path) -> Stores:
    """The backends with a conditional put between processes (hf-mount has none, §14)."""
    return _stores(request, tmp_path)


def _stores(request, tmp_path) -> Stores:
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        return Stores(bucket.url, tmp_path, bucket.server.env)
    if request.param == "hfsim":
        return Stores(f"hfsim://{tmp_path}/store", tmp_path)
    return Stores(str(tmp_path / "store"), tmp_path)


def local_keys(store: Path) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file() and ".tmp" not in p.parts)


def race(stores: Stores, jobs: list[tuple[str, str, str, str]]) -> list[tuple[str, int, bool]]:
    """Run one appender process per ``(harness, session, client id, text)``, all at once."""
    start_r, start_w = os.pipe()
    env = clean_env(stores.container("racer"))
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(start_r), *job], env=env, pass_fds=(start_r,),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for job in jobs]
    os.close(start_r)
    try:
        for proc in procs:
            assert proc.stdout.readline() == "ready\n", proc.stderr.read()
        os.write(start_w, b"x" * len(procs))
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            ident, seq, duplicate = out.split()
            results.append((ident, int(seq), duplicate == "True"))
        return results
    finally:
        os.close(start_w)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# ---------------------------------------------------------------- keys


HOSTILE = ["../../etc/passwd", "a/b", ".hidden", "-rf", "a\\b", "名前 セッション", "x" * 256, "S", "S ", "s",
           "..", "a.b-0123456789abcdef0123"]


def test_a_session_name_reaches_a_key_only_through_safe_characters_and_its_digest():
    dirs = {name: session_dir("codex", name) for name in HOSTILE}
    assert len(set(dirs.values())) == len(HOSTILE), "every session its own directory"
    keys = []
    for name, sdir in dirs.items():
        assert "/" not in sdir and not sdir.startswith(".") and len(sdir) <= 64 + 1 + 32 + 1 + 20
        for seq in (1, 7, 10 ** 12 - 1):
            keys += [input_key(sdir, seq), delivery_key(sdir, seq)]
        keys.append(claim_key(sdir, "client/../1"))
        assert parse_id(f"{sdir}/7") == (sdir, 7)
    assert session_dir("codex", "my-session_2").startswith("codex.my-session_2-"), "a plain name stays readable"
    for key in keys:
        check_key(key)
        assert parse_key(key) is not None and key.startswith(INPUT_PREFIX)
    ordered = sorted(keys)
    assert not any(b.startswith(a) for a, b in zip(ordered, ordered[1:])), "no key is a prefix of another"


@pytest.mark.parametrize("harness, session", [("co/dex", "S"), ("", "S"), (".codex", "S"), ("codex", ""),
                                              ("codex", "two\nlines"), ("codex", "x" * 257), ("codex", "\ud800")])
def test_a_name_an_input_cannot_carry_is_refused(harness, session):
    with pytest.raises(ConfigError):
        session_dir(harness, session)


# ---------------------------------------------------------------- append, durability, retries


def test_append_prints_only_once_durable_and_a_kill_9_right_after_leaves_it_for_a_new_container(tmp_path):
    stores = Stores(str(tmp_path / "store"), tmp_path)
    first = stores.container("first")
    stores.run("input", "append", "--harness", "codex", "--session", "S", "-", env=first, stdin=b"warm up")
    proc = subprocess.Popen([sys.executable, "-m", "journal", "input", "append", "--harness", "codex",
                             "--session", "S", "--pane", "p1", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=clean_env(first))
    proc.stdin.write("the prompt, typed once\n".encode())
    proc.stdin.close()
    ident, seq = proc.stdout.readline().split()
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    fresh = stores.container("second")      # a new container on the same store
    listed = stores.inputs(env=fresh)
    assert [(i["id"], i["seq"], i["pane"], i["delivered"]) for i in listed][-1] == (ident.decode(), 2, "p1", False)
    assert int(seq) == 2
    assert stores.run("input", "show", ident.decode(), env=fresh).stdout == "the prompt, typed once\n".encode()
    assert list((tmp_path / "store" / ".tmp").iterdir()) == []

    # Killed at its last fsync (the directory's, after the input's rename) it prints nothing:
    # the id comes only once the object is durable.
    script = write_tripwire(tmp_path)
    counted = subprocess.run([sys.executable, str(script), "input", "append", "--harness", "codex", "--session",
                              "S", "-"], input=b"count", capture_output=True, env={**os.environ, **first,
                                                                                    "JOURNAL_TEST_KILL": "fsync:0"})
    calls = int(counted.stderr.decode().rsplit("calls=", 1)[1])
    killed = subprocess.run([sys.executable, str(script), "input", "append", "--harness", "codex", "--session",
                             "S", "-"], input=b"killed", capture_output=True,
                            env={**os.environ, **first, "JOURNAL_TEST_KILL": f"fsync:{calls}"})
    assert killed.returncode == -signal.SIGKILL and killed.stdout == b""
    assert [i["seq"] for i in stores.inputs(env=fresh)] == [1, 2, 3, 4], "renamed before the kill: it is stored"


def test_a_retry_with_the_same_client_id_returns_the_first_and_stores_nothing(tmp_path):
    stores = Stores(str(tmp_path / "store"), tmp_path)
    args = ("input", "append", "--harness", "codex", "--session", "S", "--client-id", "c-1", "--json", "-")
    first = json.loads(stores.run(*args, stdin=b"first").stdout)
    keys = local_keys(tmp_path / "store")
    again = json.loads(stores.run(*args, stdin=b"first").stdout)
    other = stores.container("b")
    third = stores.run(*args[:-2], "-", env=other, stdin=b"first")

    assert (first["duplicate"], again["duplicate"]) == (False, True)
    assert again["id"] == first["id"] and again["seq"] == first["seq"] == 1
    assert third.stdout.decode().split() == [first["id"], "1"]
    assert "was stored already" in third.stderr.decode()
    assert local_keys(tmp_path / "store") == keys, "a retry stores nothing"
    assert stores.run("input", "show", first["id"]).stdout == b"first"


def test_a_reused_client_id_with_another_text_is_exit_2_naming_the_first_and_stores_nothing(tmp_path):
    stores = Stores(str(tmp_path / "store"), tmp_path)
    args = ("input", "append", "--harness", "codex", "--session", "S", "--client-id", "c-1", "-")
    first = stores.run(*args, stdin=b"first").stdout.split()[0].decode()
    keys = local_keys(tmp_path / "store")

    other = stores.run(*args, "--json", stdin=b"another prompt", expect=2)

    (line,) = other.stderr.decode().splitlines()
    assert f"client id 'c-1' was used already, by input {first}, with another text" in line
    assert json.loads(other.stdout)["kind"] == "ClientIdReused"
    assert local_keys(tmp_path / "store") == keys, "nothing stored"
    assert [i["id"] for i in stores.inputs()] == [first]


@pytest.mark.parametrize("window", ["claim stored, input not", "input stored, not printed"])
def test_a_retry_after_a_kill_inside_an_append_stores_the_input_exactly_once(tmp_path, window):
    stores = Stores(str(tmp_path / "store"), tmp_path)
    env = {**os.environ, **stores.container("a")}
    stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=b"before")
    script = write_tripwire(tmp_path)
    argv = [sys.executable, str(script), "input", "append", "--harness", "codex", "--session", "S", "--client-id",
            "c-7", "-"]
    counted = subprocess.run(argv[:-3] + ["--client-id", "probe", "-"], input=b"probe", capture_output=True,
                             env={**env, "JOURNAL_TEST_KILL": "fsync:0"})
    assert counted.stderr.decode().rsplit("calls=", 1)[1].strip() == "4", "claim: file + dir, input: file + dir"
    # fsync 3 is the input's own: the claim is published, the input never renamed; fsync 4 is
    # its directory's: the input is renamed, and the append dies before it says so.
    at = 3 if window.startswith("claim") else 4
    killed = subprocess.run(argv, input=b"the prompt", capture_output=True, env={**env, "JOURNAL_TEST_KILL": f"fsync:{at}"})
    assert killed.returncode == -signal.SIGKILL and killed.stdout == b""

    retried = [json.loads(stores.run(*argv[2:-1], "--json", "-", stdin=b"the prompt").stdout) for _ in range(2)]
    listed = stores.inputs()
    assert [i["client_id"] for i in listed] == [None, "probe", "c-7"], "stored exactly once"
    assert retried[0]["id"] == retried[1]["id"] == listed[2]["id"]
    assert retried[0]["duplicate"] is (at == 4) and retried[1]["duplicate"] is True
    assert stores.run("verify", "--full").returncode == 0


def test_a_retry_while_the_first_attempt_is_still_running_waits_for_it_and_stores_nothing(tmp_path):
    """The first append stops (SIGSTOP) after its claim, before its input is renamed into
    place: a retry from another process finds the claim and no input yet. It must wait
    for the living first attempt and answer with its input, not store the prompt twice."""
    stores = Stores(str(tmp_path / "store"), tmp_path)
    env = {**os.environ, **stores.container("a")}
    stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=b"before")  # makes the store
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(b"the prompt")
    argv = [sys.executable, str(write_tripwire(tmp_path)), "input", "append", "--harness", "codex", "--session",
            "S", "--client-id", "c-9", "--file", str(prompt), "--json"]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**env, "JOURNAL_TEST_KILL": "fsync:3", "JOURNAL_TEST_SIGNAL": "SIGSTOP"})
    retry = None
    try:
        wait_for(lambda: _stopped(first.pid), 60, "the first append stopped after its claim")
        retry = subprocess.Popen([sys.executable, "-m", "journal", *argv[2:-1]], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=clean_env(stores.container("b")))
        says = retry.stderr.readline().decode()
        assert "was claimed by pid" in says and "waiting up to" in says, says
        os.kill(first.pid, signal.SIGCONT)
        out_first, _ = first.communicate(timeout=60)
        out_retry, err_retry = retry.communicate(timeout=60)
    finally:
        for proc in (first, retry):
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait()

    assert first.returncode == 0 and retry.returncode == 0, err_retry
    a = json.loads(out_first)
    assert a["duplicate"] is False and out_retry.decode().split() == [a["id"], "2"]
    assert "was stored already" in err_retry.decode()
    assert [i["client_id"] for i in stores.inputs()] == [None, "c-9"], "stored exactly once"


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("mode", ["one session", "four sessions"])
def test_twenty_concurrent_appenders_get_unique_gapless_sequences(shared_stores, mode):
    sessions = 1 if mode == "one session" else 4
    jobs = [("codex", f"S{i % sessions}", f"c{i}" if i % 2 else "", f"prompt {i}") for i in range(20)]
    results = race(shared_stores, jobs)

    assert len({ident for ident, _, _ in results}) == 20 and not any(dup for _, _, dup in results)
    log = shared_stores.log()
    listed = list(log.list())
    assert sorted(i.id for i in listed) == sorted(ident for ident, _, _ in results)
    for s in range(sessions):
        seqs = [i.seq for i in listed if i.session == f"S{s}"]
        assert seqs == list(range(1, 20 // sessions + 1)), f"session S{s}: {seqs}"
    texts = {log.show(i.id)[1].decode() for i in listed}
    assert texts == {f"prompt {i}" for i in range(20)}, "each input once, its own text"


# ---------------------------------------------------------------- the size limit and bad input


def test_an_input_over_the_limit_is_refused_with_exit_2_and_nothing_is_stored(tmp_path):
    stores = Stores(str(tmp_path / "store"), tmp_path)
    big = tmp_path / "big"
    big.write_bytes(b"x" * ((1 << 20) + 1))
    for args, stdin in ((("--file", str(big)), None), (("-",), big.read_bytes())):
        proc = stores.run("input", "append", "--harness", "codex", "--session", "S", *args, stdin=stdin, expect=2)
        lines = proc.stderr.decode().splitlines()
        assert len(lines) == 1 and "over the input limit of 1,048,576 bytes; nothing was stored" in lines[0]
    assert not (tmp_path / "store").exists(), "not even the store was created"

    small = {**stores.container("a"), "JOURNAL_INPUT_LIMIT": "10"}
    stores.run("input", "append", "--harness", "codex", "--session", "S", "-", env=small, stdin=b"x" * 11, expect=2)
    exact = stores.run("input", "append", "--harness", "codex", "--session", "S", "-", env=small, stdin=b"x" * 10)
    assert exact.stdout.decode().split()[1] == "1"
    proc = stores.run("input", "append", "--harness", "codex", "--session", "S", "--json", "-",
                      env={**small, "JOURNAL_INPUT_LIMIT": "17MiB"}, stdin=b"x", expect=2)
    assert json.loads(proc.stdout)["kind"] == "ConfigError" and "input_limit '17MiB'" in proc.stderr.decode()
    assert [i["size"] for i in stores.inputs()] == [10]


@pytest.mark.parametrize("args, message", [
    (("append", "--harness", "co/dex", "--session", "S", "-"), "is not a harness name"),
    (("append", "--harness", "codex", "--session", "a\tb", "-"), "must be one line"),
    (("append", "--harness", "codex", "--session", "S"), "give the text as --file F or as -"),
    (("show", "../../etc/passwd"), "is not an input id"),
    (("mark-delivered", "codex.S-0123456789abcdef0123/0"), "is not an input id"),
    (("list", "--session", "S"), "--session needs --harness"),
    (("list", "--since", "yesterday"), "is neither an ISO-8601 time nor a duration"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    stores = Stores(str(tmp_path / "store"), tmp_path)
    stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=b"x")
    proc = stores.run("input", *args, stdin=b"x", expect=2)
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("journal: error: ") and message in lines[0], lines


def test_an_unknown_or_damaged_input_is_named_with_exit_1(tmp_path):
    stores = Stores(str(tmp_path / "store"), tmp_path)
    ident = stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=b"x").stdout.split()[0]
    sdir, _ = parse_id(ident.decode())
    missing = stores.run("input", "show", f"{sdir}/9", expect=1)
    assert f"{input_key(sdir, 9)} does not exist" in missing.stderr.decode()
    path = tmp_path / "store" / input_key(sdir, 1)
    data = bytearray(path.read_bytes())
    data[-2] ^= 0xFF
    path.write_bytes(bytes(data))
    for args in (("show", ident.decode()), ("mark-delivered", ident.decode())):
        proc = stores.run("input", *args, expect=1)
        assert f"{input_key(sdir, 1)} is corrupt" in proc.stderr.decode()
    listed = stores.run("input", "list")
    assert listed.stdout == b"" and "skipping" in listed.stderr.decode()
    assert not (tmp_path / "store" / delivery_key(sdir, 1)).exists()


# ---------------------------------------------------------------- an input's identity, a marker's input


def _copy(store: Path, src: str, dst: str) -> None:
    (store / dst).write_bytes((store / src).read_bytes())


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
def test_an_input_copied_to_the_next_sequence_is_refused_never_listed_and_verify_reports_it(tmp_path, sealed):
    """Copying a delivered input's object to the next free sequence would make a new,
    undelivered prompt of it (replayed after a restart): its record names its sequence,
    so the copy is refused everywhere, in a plain store as under the seal."""
    key = tmp_path / "store.key"
    stores = Stores(str(tmp_path / "store"), tmp_path, {"JOURNAL_KEY_FILE": str(key)} if sealed else {})
    if sealed:
        stores.run("init", "--encrypt", "--key-file", str(key))
    ident = stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=b"rm -rf build")
    ident = ident.stdout.decode().split()[0]
    stores.run("input", "mark-delivered", ident)
    sdir, _ = parse_id(ident)
    _copy(tmp_path / "store", input_key(sdir, 1), input_key(sdir, 2))

    undelivered = stores.run("input", "list", "--undelivered")
    assert undelivered.stdout == b"", "the copy is no new prompt"
    assert f"{input_key(sdir, 2)} is corrupt: input #1 stored under the key of #2" in undelivered.stderr.decode()
    assert [i["seq"] for i in stores.inputs()] == [1]
    shown = stores.run("input", "show", f"{sdir}/2", expect=1)
    assert "input #1 stored under the key of #2" in shown.stderr.decode()
    found = json.loads(stores.run("verify", "--full", "--json", expect=1).stdout)["findings"]
    assert [(f["kind"], f["key"]) for f in found] == [("corrupt-input", input_key(sdir, 2))]
    nxt = stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=b"next")
    assert nxt.stdout.decode().split()[1] == "3", "the copy still takes its sequence: none is given twice"


def test_an_input_written_before_heads_named_their_sequence_is_read_as_before(tmp_path):
    """A version 1 head (format 10 and earlier) names no sequence: it is listed, shown,
    delivered and verified as it always was (and not protected against a copy)."""
    repo = Repository.open(open_store(str(tmp_path / "store")), create=True)
    sdir = session_dir("codex", "S")
    head = {"version": 1, "harness": "codex", "session": "S", "pane": None, "client_id": "c-1",
            "submitted": "2026-01-02T03:04:05.000Z", "submitted_ns": 1767323045000000000, "size": 3, "host": "old"}
    _rid, record = encode_record(KIND_INPUT, json.dumps(head).encode() + b"\nold", codec=repo.codec)
    repo.store.put_if_absent(input_key(sdir, 1), record)
    log = InputLog(repo)

    assert [(i.seq, i.client_id, i.delivered) for i in log.list()] == [(1, "c-1", False)]
    assert log.show(f"{sdir}/1")[1] == b"old"
    log.mark_delivered(f"{sdir}/1")
    assert log.append("codex", "S", b"new").seq == 2
    assert [i.delivered for i in log.list()] == [True, False]
    assert verify(repo, full=True).findings == []


def test_a_delivery_marker_left_by_a_lost_input_marks_nothing_and_the_new_prompt_is_undelivered(tmp_path):
    """The newest input is lost, its marker stays, and the next append takes its
    sequence: the marker names the lost record, so the new prompt is undelivered (with a
    warning, and a finding of verify) until it is marked delivered, which replaces it."""
    stores = Stores(str(tmp_path / "store"), tmp_path)
    ids = [stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=text).stdout.split()[0]
           .decode() for text in (b"first", b"second")]
    for ident in ids:
        stores.run("input", "mark-delivered", ident)
    sdir, _ = parse_id(ids[1])
    (tmp_path / "store" / input_key(sdir, 2)).unlink()
    new = stores.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin=b"the new prompt")
    assert new.stdout.decode().split() == [ids[1], "2"], "the lost input's sequence, taken again"

    listed = stores.run("input", "list", "--undelivered")
    assert [line.split()[0] for line in listed.stdout.decode().splitlines()] == [ids[1]]
    assert f"ignoring the delivery marker {delivery_key(sdir, 2)}: it names input record" in listed.stderr.decode()
    assert json.loads(stores.run("input", "show", ids[1], "--json").stdout)["delivered"] is False
    found = json.loads(stores.run("verify", "--full", "--json", expect=1).stdout)["findings"]
    assert [(f["kind"], f["key"]) for f in found] == [("corrupt-input", delivery_key(sdir, 2))]

    marked = stores.run("input", "mark-delivered", ids[1])
    assert marked.stdout.decode().startswith(f"{ids[1]} delivered at ")
    assert f"replacing the delivery marker {delivery_key(sdir, 2)}" in marked.stderr.decode()
    assert stores.inputs("--undelivered") == [] and [i["delivered"] for i in stores.inputs()] == [True, True]
    assert json.loads(stores.run("verify", "--full", "--json").stdout)["findings"] == []


# ---------------------------------------------------------------- the whole cycle, and restore


def test_a_full_cycle_of_append_list_show_deliver_verify_and_gc(stores):
    prompt = bytes(range(256)) + "é\n".encode()   # any bytes: not UTF-8
    (stores.tmp / "prompt").write_bytes(prompt)
    first = json.loads(stores.run("input", "append", "--harness", "codex", "--session", "S/1", "--pane", "p1",
                                  "--client-id", "c1", "--file", str(stores.tmp / "prompt"), "--json").stdout)
    retry = json.loads(stores.run("input", "append", "--harness", "codex", "--session", "S/1", "--client-id", "c1",
                                  "--json", "-", stdin=prompt).stdout)
    second = stores.run("input", "append", "--harness", "codex", "--session", "S/1", "-", stdin=b"second")
    other = stores.run("input", "append", "--harness", "claude", "--session", "T", "-", stdin=b"other")
    assert retry["id"] == first["id"] and retry["duplicate"]
    assert second.stdout.decode().split()[1] == "2" and other.stdout.decode().split()[1] == "1"

    listed = stores.inputs()
    assert [(i["harness"], i["session"], i["seq"]) for i in listed] == [("claude", "T", 1), ("codex", "S/1", 1),
                                                                         ("codex", "S/1", 2)]
    assert [i["seq"] for i in stores.inputs("--harness", "codex", "--session", "S/1")] == [1, 2]
    assert [i["harness"] for i in stores.inputs("--harness", "claude")] == ["claude"]
    assert stores.run("input", "show", first["id"]).stdout == prompt
    shown = json.loads(stores.run("input", "show", first["id"], "--json").stdout)
    assert shown["pane"] == "p1" and shown["client_id"] == "c1" and "text_base64" in shown

    ids = {i["session"] + str(i["seq"]): i["id"] for i in listed}
    stores.run("input", "mark-delivered", ids["S/11"])
    again = json.loads(stores.run("input", "mark-delivered", ids["S/11"], "--json").stdout)
    stores.run("input", "mark-delivered", ids["T1"])
    assert again["already"] is True
    assert [i["id"] for i in stores.inputs("--undelivered")] == [ids["S/12"]]
    assert json.loads(stores.run("verify", "--full", "--json").stdout)["inputs"] == 3

    # gc: delivered inputs older than 0s expire, but never a session's newest (T1, S/1 2).
    for _ in range(3):   # mark; sweep the claim and the input; sweep the marker
        stores.run("gc", "--keep-inputs-within", "0s", "--grace", "0s")
    assert [i["id"] for i in stores.inputs()] == [ids["T1"], ids["S/12"]]
    assert json.loads(stores.run("verify", "--full", "--json").stdout)["findings"] == []
    nxt = stores.run("input", "append", "--harness", "codex", "--session", "S/1", "-", stdin=b"third")
    assert nxt.stdout.decode().split()[1] == "3", "a sequence is never given twice"


def test_restore_writes_no_input_and_undelivered_inputs_outlive_the_container(live: Live, make_live):
    live.checkpoint()
    before = Live.snapshot(live.local)
    env = live.env
    for i in range(3):
        run_journal("input", "append", "--harness", "codex", "--session", "S", "--file", str(_text(live, i)), env=env)
    first = json.loads(run_journal("input", "list", "--json", env=env).stdout)[0]["id"]
    assert run_journal("input", "mark-delivered", first, env=env).returncode == 0

    fresh = make_live("restarted", fixtures=False)
    restored = run_journal("restore", env=fresh.env)
    assert restored.returncode == 0, restored.stderr
    assert Live.snapshot(fresh.local) == before, "restore wrote exactly the checkpoint: no input"
    undelivered = json.loads(run_journal("input", "list", "--undelivered", "--json", env=fresh.env).stdout)
    assert [i["seq"] for i in undelivered] == [2, 3]
    assert "idle" in run_journal("checkpoint", env=fresh.env).stdout, "inputs are no part of a checkpoint"


def _text(live: Live, i: int) -> Path:
    path = live.home / f"prompt-{i}"
    path.write_text(f"prompt {i}")
    return path
