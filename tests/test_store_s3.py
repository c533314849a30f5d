"""The cloud backend against S3 (moto's server): the store contract, conditional puts
under races between threads and processes, multipart uploads, and the whole
checkpoint -> restore -> verify loop through the CLI."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import Live, run_journal, wait_for
from store_contract import RecordingStream, StoreContract

from journal.checkpoint.run import checkpoint
from journal.config import load_config
from journal.errors import KeyExists
from journal.store import open_store
from journal.store.cloud import SINGLE_PUT_LIMIT, CloudStore

pytest_plugins = ["tests.s3server"]

ROLLOUT = "codex-home/sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
SESSION = "oc-home/.openclaw/agents/main/sessions/d703a1a9-1b7b-4fb1-b512-c9738b1fe617.jsonl"


class TestS3Store(StoreContract):
    @pytest.fixture
    def make_store(self, s3_server):
        return lambda: CloudStore(s3_server.new_bucket().url)


def test_open_store_gives_a_cloud_store_for_an_s3_url(s3_url):
    store = open_store(s3_url)
    assert isinstance(store, CloudStore) and store.is_empty()


def test_stores_on_sibling_prefixes_of_one_bucket_are_independent(s3_server):
    bucket = s3_server.new_bucket(prefix="journal")
    sibling = CloudStore(s3_server.url(bucket.name, "journal2"))
    nested = CloudStore(s3_server.url(bucket.name, "journal/sub"))
    sibling.put_if_absent("config", b"sibling")
    nested.put_if_absent("packs/ab/x", b"nested")
    store = CloudStore(bucket.url)

    assert list(store.list()) == ["sub/packs/ab/x"]
    assert store.head("config") is None
    store.put_if_absent("config", b"mine")
    assert sibling.get("config") == b"sibling" and store.get("config") == b"mine"
    assert list(sibling.list()) == ["config"]


def test_put_existing_key_is_refused_by_the_server_with_412(s3_bucket):
    store = CloudStore(s3_bucket.url)
    store.put_if_absent("manifests/000000000001", b"first")
    etag = s3_bucket.etag("manifests/000000000001")
    since = s3_bucket.mark()

    with pytest.raises(KeyExists):
        store.put_if_absent("manifests/000000000001", b"second")

    puts = [r for r in s3_bucket.writes(since) if r[0] == "PUT"]
    assert len(puts) == 1, "one conditional PUT, no HEAD-then-PUT"
    assert s3_bucket.etag("manifests/000000000001") == etag
    assert store.get("manifests/000000000001") == b"first"
    assert (store.puts, store.put_bytes) == (1, 5)


def test_two_threads_racing_on_one_key_have_exactly_one_winner(s3_url):
    stores = [CloudStore(s3_url), CloudStore(s3_url)]
    for round_ in range(10):
        key = f"manifests/{round_:012d}"
        barrier = threading.Barrier(2)
        outcome: dict[int, str] = {}

        def race(n: int) -> None:
            barrier.wait()
            try:
                stores[n].put_if_absent(key, f"writer {n}".encode() * 1000)
                outcome[n] = "won"
            except KeyExists:
                outcome[n] = "lost"

        threads = [threading.Thread(target=race, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcome.values()) == ["lost", "won"], (key, outcome)
        winner = next(n for n, o in outcome.items() if o == "won")
        assert stores[0].get(key) == f"writer {winner}".encode() * 1000


RACER = textwrap.dedent(r'''
    import json, os, sys, time
    from journal.errors import KeyExists
    from journal.store import open_store
    url, name, go, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = open_store(url)
    store.head("warm-up")                   # connect before the start line
    open(go + "." + name, "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    results = {}
    for n in range(rounds):
        try:
            store.put_if_absent(f"manifests/{n:012d}", f"{name}:{n}".encode() * 500)
            results[n] = "won"
        except KeyExists:
            results[n] = "lost"
    print(json.dumps(results))
''')


def test_two_processes_racing_on_the_same_keys_have_exactly_one_winner_each(s3_server, s3_url, tmp_path):
    rounds = 30
    go = tmp_path / "go"
    env = {**os.environ, **s3_server.env}
    procs = [subprocess.Popen([sys.executable, "-c", RACER, s3_url, name, str(go), str(rounds)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    deadline = time.monotonic() + 30
    while not all(Path(f"{go}.{name}").exists() for name in "ab") and time.monotonic() < deadline:
        time.sleep(0.005)                    # both imported obstore and connected
    go.touch()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append({int(k): v for k, v in json.loads(out).items()})

    store = CloudStore(s3_url)
    for n in range(rounds):
        assert sorted(o[n] for o in outputs) == ["lost", "won"], (n, outputs)
        winner = "ab"[[o[n] for o in outputs].index("won")]
        assert store.get(f"manifests/{n:012d}") == f"{winner}:{n}".encode() * 500
    assert len(list(store.list("manifests/"))) == rounds


def test_stream_larger_than_one_put_goes_multipart_and_counts_its_bytes(s3_bucket):
    store = CloudStore(s3_bucket.url)
    payload = os.urandom(SINGLE_PUT_LIMIT + (3 << 20) + 7)
    stream = RecordingStream(payload)
    since = s3_bucket.mark()

    store.put_if_absent("packs/ab/big", stream)

    assert (store.puts, store.put_bytes) == (1, len(payload))
    assert store.head("packs/ab/big") == len(payload)
    assert store.get("packs/ab/big") == payload
    assert store.get("packs/ab/big", SINGLE_PUT_LIMIT - 3, SINGLE_PUT_LIMIT + 5) == \
        payload[SINGLE_PUT_LIMIT - 3:SINGLE_PUT_LIMIT + 5]
    assert "-" in s3_bucket.etag("packs/ab/big"), "a multipart upload's ETag ends in -<parts>"
    assert any(q.startswith("uploads") for _, _, q in s3_bucket.writes(since)), "no CreateMultipartUpload"
    assert all(size is not None and 0 < size <= 8 << 20 for size in stream.sizes), "reads are bounded"


def test_multipart_put_of_an_existing_key_raises_and_keeps_the_old_object(s3_bucket):
    store = CloudStore(s3_bucket.url)
    store.put_if_absent("packs/ab/big", b"old")

    with pytest.raises(KeyExists):
        store.put_if_absent("packs/ab/big", io.BytesIO(os.urandom(SINGLE_PUT_LIMIT + 1)))

    assert store.get("packs/ab/big") == b"old"
    assert (store.puts, store.put_bytes) == (1, 3)


# --- the whole loop through the CLI ------------------------------------------------------------


def on_s3(home: Path, bucket, fixtures: bool = True) -> Live:
    """One container on the S3 store: ``$AM_LOCAL`` with the real fixtures, ``HOME``, the
    CLI (``run`` expects exit 0 unless told)."""
    return Live(home, bucket.url, env=dict(bucket.server.env), fixtures=fixtures, expect=0)


def test_checkpoint_wipe_restore_verify_round_trip_on_s3(s3_bucket, tmp_path):
    box = on_s3(tmp_path / "c", s3_bucket)
    box.run("checkpoint")
    with open(box.local / ROLLOUT, "ab") as fh:
        fh.write(b'{"type":"event_msg","payload":{"type":"agent_message","message":"appended"}}\n')
    with open(box.local / SESSION, "ab") as fh:
        fh.write(b'{"type":"message","id":"x1","message":{"role":"user","content":"more"}}\n')
    second = box.run("checkpoint", "--json")
    assert json.loads(second.stdout)["seq"] == 2
    want = Live.snapshot(box.local)
    assert any(k == ROLLOUT for k in want) and any(k == SESSION for k in want)

    for child in box.local.iterdir():           # the container is gone: trees and state
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    assert not (box.local / ".journal").exists()
    restored = box.run("restore")

    assert "restore complete" in restored.stdout
    assert Live.snapshot(box.local) == want
    verified = box.run("verify", "--full")
    assert verified.stdout.strip().startswith("ok:") and "2 manifests" in verified.stdout
    assert sorted(k.split("/")[0] for k in s3_bucket.objects()) == ["config"] + ["manifests"] * 2 + ["packs"] * 4


def test_a_flipped_character_of_the_config_on_s3_is_named_by_checkpoint_and_verify(s3_bucket, tmp_path):
    box = on_s3(tmp_path / "c", s3_bucket)
    box.run("checkpoint")
    key = f"{s3_bucket.prefix}/config"
    raw = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    at = raw.index(b'"created":"') + 12
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=key, Body=raw[:at] + b"9" + raw[at + 1:])
    with open(box.local / ROLLOUT, "ab") as fh:
        fh.write(b'{"type":"event_msg","payload":{"type":"agent_message","message":"x"}}\n')
    before = s3_bucket.objects()

    refused = box.run("checkpoint", expect=None)
    verified = box.run("verify", "--json", expect=None)

    assert refused.returncode == 1 and "config fails its checksum" in refused.stderr, refused.stderr
    assert "local state" not in refused.stderr
    doc = json.loads(verified.stdout)
    assert verified.returncode == 1 and [f["kind"] for f in doc["findings"]] == ["corrupt-config"]
    assert doc["manifests"] == 1 and s3_bucket.objects() == before


def test_idle_checkpoint_makes_no_write_request(s3_bucket, tmp_path):
    box = on_s3(tmp_path / "c", s3_bucket)
    box.run("checkpoint")
    before = s3_bucket.objects()
    since = s3_bucket.mark()

    idle = box.run("checkpoint")

    assert idle.stdout.startswith("idle:")
    assert s3_bucket.writes(since) == []
    assert s3_bucket.objects() == before


def test_idle_checkpoint_in_process_counts_no_put(s3_bucket, tmp_path):
    box = on_s3(tmp_path / "c", s3_bucket)
    cfg = load_config(env=box.env)
    assert checkpoint(cfg, CloudStore(s3_bucket.url)).seq == 1
    store = CloudStore(s3_bucket.url)
    since = s3_bucket.mark()

    result = checkpoint(cfg, store)

    assert result.seq is None and (store.puts, store.put_bytes) == (0, 0)
    assert s3_bucket.writes(since) == []


# --------------------------------------------------------------------------- listing streams


def test_a_listing_streams_page_by_page_in_ascending_order(s3_bucket, monkeypatch):
    import journal.store.cloud as cloud

    monkeypatch.setattr(cloud, "LIST_PAGE", 7)
    store = CloudStore(s3_bucket.url)
    keys = [f"packs/{i % 5:02x}/{i:064x}" for i in range(40)] + [f"manifests/{i:012d}" for i in range(1, 4)]
    for key in keys:
        store.put_if_absent(key, b"x")

    assert list(store.list("packs/")) == sorted(k for k in keys if k.startswith("packs/"))
    assert list(store.list("packs/03/")) == sorted(k for k in keys if k.startswith("packs/03/"))
    assert list(store.list("manifests/00000000000")) == [f"manifests/{i:012d}" for i in range(1, 4)]
    assert list(store.list()) == sorted(keys)


def test_list_sizes_comes_in_the_listing_pages_without_a_head_request(s3_bucket, monkeypatch):
    import journal.store.cloud as cloud

    monkeypatch.setattr(cloud, "LIST_PAGE", 7)
    store = CloudStore(s3_bucket.url)
    sizes = {f"packs/{i % 5:02x}/{i:064x}": i * 3 for i in range(40)}
    for key, size in sizes.items():
        store.put_if_absent(key, b"p" * size)
    since = s3_bucket.mark()

    assert list(store.list_sizes("packs/")) == sorted(sizes.items())

    requests = [m for m, path, _ in s3_bucket.server.requests[since:] if path.startswith(f"/{s3_bucket.name}")]
    assert requests == ["GET"], requests  # one ListObjectsV2 request (obstore hands it over 7 keys at a time), no HEAD


def _checkpoints_and_orphans(s3_bucket, tmp_path, orphans: int):
    """Checkpoints 1-3 of a one-file tree on a CloudStore, then ``orphans`` packs no
    manifest names (of 1, 2, ... bytes). Returns the config, the store, the tree
    directory and the orphans' keys."""
    from concurrent.futures import ThreadPoolExecutor

    from journal.repository.repository import pack_key

    box = on_s3(tmp_path / "c", s3_bucket, fixtures=False)
    tree = box.local / "codex-home"
    tree.mkdir()
    cfg = load_config(env=box.env)
    store = CloudStore(s3_bucket.url)
    for i in range(3):
        (tree / "a.txt").write_text(f"version {i}\n" * (50 + i))
        assert checkpoint(cfg, store).seq == i + 1
    keys = [pack_key(f"{i:064x}") for i in range(orphans)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: store.put_if_absent(keys[i], b"o" * (i + 1)), range(orphans)))
    return cfg, store, tree, keys


def test_gc_on_s3_makes_no_head_request(s3_bucket, tmp_path):
    """A dry run, a mark and a sweep over an S3 store: sizes come from the listings and
    the sweep's existence check from the mark's listing, so no HEAD, however many packs."""
    from journal.gc.run import gc
    from journal.repository.repository import PACK_PREFIX, Repository
    from journal.gc.retention import Policy
    from journal.verify import verify

    cfg, store, tree, keys = _checkpoints_and_orphans(s3_bucket, tmp_path, 30)
    orphans = set(keys)
    repo = Repository.open(store)

    def heads(grace: float, **kwargs):
        since = s3_bucket.mark()
        plan, result = gc(repo, Policy(keep_last=1), grace, **kwargs)
        return plan, result, [r for r in s3_bucket.server.requests[since:] if r[0] == "HEAD"]

    dry, _, dry_heads = heads(0.0, dry_run=True)
    mark, marked, mark_heads = heads(3600.0)
    (tree / "a.txt").write_text("version 4\n")
    assert checkpoint(cfg, store).seq == 4  # the store moves past the mark: the orphans may go
    sweep, swept, sweep_heads = heads(0.0)

    assert (dry_heads, mark_heads, sweep_heads) == ([], [], [])
    assert dry.tombstone_count == mark.tombstone_count == marked.tombstoned == swept.deleted > len(orphans) + 2
    assert sweep.bytes_freed == swept.bytes_freed == mark.tombstone_bytes
    assert not orphans & set(store.list(PACK_PREFIX))
    assert verify(repo, full=True).ok


class _FakeListing:
    """Stands in for obstore's ``list``: yields the given pages, counting what was fetched."""

    def __init__(self, pages):
        self.pages = pages
        self.fetched = 0

    def list(self, store, prefix=None, chunk_size=50):
        for page in self.pages:
            self.fetched += 1
            yield [{"path": k, "size": len(k)} for k in page]


def _fake_store(pages) -> tuple[CloudStore, _FakeListing]:
    store = CloudStore("s3://bucket/prefix?region=us-east-1")
    fake = _FakeListing(pages)
    store._ob = fake
    return store, fake


def test_an_ordered_listing_is_not_collected_before_the_first_key():
    store, fake = _fake_store([["packs/00/a", "packs/00/b"], ["packs/01/a"], ["packs/02/a", "packs/03/a"]])

    it = store.list("packs/")
    assert next(it) == "packs/00/a" and fake.fetched == 1
    assert list(it) == ["packs/00/b", "packs/01/a", "packs/02/a", "packs/03/a"] and fake.fetched == 3


def test_a_backend_listing_out_of_order_is_sorted_or_refused():
    from journal.errors import StoreError

    unordered_first = [["packs/02/a", "packs/00/a"], ["packs/01/a"]]
    store, _ = _fake_store(unordered_first)
    assert list(store.list("packs/")) == ["packs/00/a", "packs/01/a", "packs/02/a"]  # collected and sorted

    store, _ = _fake_store([["packs/01/a", "packs/02/a"], ["packs/00/a"]])
    with pytest.raises(StoreError, match="not in ascending order"):
        list(store.list("packs/"))  # never a key out of order


# --------------------------------------------------------------------------- bulk deletes


def _requests_to(bucket, since: int) -> list[tuple[str, str]]:
    """``(method, query)`` of every request to ``bucket`` since ``since`` (bulk deletes are
    ``POST /<bucket>?delete``, outside the prefix)."""
    return [(m, q) for m, path, q in bucket.server.requests[since:]
            if path == f"/{bucket.name}" or path.startswith(f"/{bucket.name}/")]


def test_delete_many_sends_one_bulk_request_per_batch_of_keys(s3_bucket, monkeypatch):
    import journal.store.cloud as cloud

    assert cloud.DELETE_REQUEST_KEYS <= 1000  # S3's DeleteObjects limit
    monkeypatch.setattr(cloud, "DELETE_REQUEST_KEYS", 3)
    store = CloudStore(s3_bucket.url)
    keys = [f"packs/{i % 3:02x}/{i:064x}" for i in range(7)]
    for key in keys:
        store.put_if_absent(key, b"x")
    since = s3_bucket.mark()

    store.delete_many(keys + ["packs/ff/missing", "manifests/000000000009"])  # 9 keys, 2 of them missing

    assert _requests_to(s3_bucket, since) == [("POST", "delete")] * 3  # DeleteObjects, no DELETE per key
    assert store.is_empty()


class _BulkFails:
    """obstore whose bulk delete fails (as GCS's and Azure's do when a key is missing);
    single deletes go through, but for the keys in ``refused``."""

    def __init__(self, real, refused=()):
        self.real = real
        self.refused = set(refused)
        self.bulk = 0

    def delete(self, store, paths):
        if not isinstance(paths, str):
            self.bulk += 1
            raise FileNotFoundError(paths[0])
        if paths in self.refused:
            raise PermissionError(f"access denied: {paths}")
        return self.real.delete(store, paths)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_failed_bulk_delete_is_settled_key_by_key(s3_bucket):
    from journal.errors import StoreError

    store = CloudStore(s3_bucket.url)
    keys = [f"packs/00/{i:064x}" for i in range(4)]
    for key in keys:
        store.put_if_absent(key, b"x")
    store._ob = fake = _BulkFails(store._ob, refused=[keys[2]])

    with pytest.raises(StoreError, match=keys[2]):
        store.delete_many(keys[:3] + ["packs/00/missing"])
    assert fake.bulk == 1 and list(store.list()) == keys[2:]  # settled in order up to the key that failed

    fake.refused.clear()
    store.delete_many(keys + ["packs/00/missing"])
    assert store.is_empty()


def test_the_gc_sweep_on_s3_sends_one_bulk_delete_per_thousand_packs(s3_bucket, tmp_path):
    """Sweeping N packs takes about N/1,000 DeleteObjects requests (one per batch), plus
    one for the expired manifests, one for the swept tombstone, one clearing a stale
    renewal marker on taking the lease and one releasing the lease: 6 here, and about 32
    requests in all. Before, it took one request per object (1,108 here, 1,168 in all)."""
    from journal.gc.run import DELETE_BATCH, gc
    from journal.repository.repository import PACK_PREFIX, Repository
    from journal.gc.retention import Policy
    from journal.verify import verify

    cfg, store, tree, orphans = _checkpoints_and_orphans(s3_bucket, tmp_path, DELETE_BATCH + 100)
    repo = Repository.open(store)
    gc(repo, Policy(keep_last=1), 3600.0)  # the mark
    (tree / "a.txt").write_text("version 4\n")
    assert checkpoint(cfg, store).seq == 4  # the store moves past the mark: the orphans may go
    since = s3_bucket.mark()

    plan, result = gc(repo, Policy(keep_last=1), 0.0)

    requests = _requests_to(s3_bucket, since)
    bulk = requests.count(("POST", "delete"))
    packs = result.deleted - 2  # manifests 1 and 2 go first, in a request of their own
    assert packs >= len(orphans) and result.tombstones_removed == 1
    assert bulk == -(-packs // DELETE_BATCH) + 4, requests  # 2 batches of packs: 6 bulk deletes for ~1,100 objects
    assert not [r for r in requests if r[0] == "DELETE"]
    assert len(requests) < 50, requests  # with the listings, lease checks and manifest reads
    assert not set(orphans) & set(store.list(PACK_PREFIX))
    assert verify(repo, full=True).ok


# --------------------------------------------------------------------------- errors an operator meets first


def _cli(bucket_url: str, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The CLI on ``bucket_url`` with only ``env`` for credentials (none by default); the
    metadata service is a closed local port, so nothing is asked of the network."""
    from s3server import free_port

    base = {"JOURNAL_STORE": bucket_url, "HOME": str(tmp_path), "NO_PROXY": "127.0.0.1,localhost",
            "AWS_METADATA_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    return run_journal(*args, env={**base, **env}, timeout=120)


def test_no_credentials_is_one_line_naming_what_to_set_and_the_rest_only_with_debug_or_json(s3_bucket, tmp_path):
    from s3server import free_port

    closed = {"AWS_METADATA_ENDPOINT": f"http://127.0.0.1:{free_port()}"}   # one address: one message
    plain = _cli(s3_bucket.url, tmp_path, "log", **closed)
    debug = _cli(s3_bucket.url, tmp_path, "log", "--debug", **closed)
    as_json = _cli(s3_bucket.url, tmp_path, "log", "--json", **closed)

    assert plain.returncode == debug.returncode == as_json.returncode == 2   # bad environment, as a missing key
    (line,) = plain.stderr.splitlines()
    assert line.startswith("journal: error: store s3://") and "no S3 credentials" in line
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in line and "Debug source" not in line
    assert debug.stderr.startswith(line + "\njournal: debug: ") and "/latest/api/token" in debug.stderr
    doc = json.loads(as_json.stdout)
    assert doc["error"] == line.removeprefix("journal: error: ") and "/latest/api/token" in doc["detail"]
    assert (doc["kind"], doc["exit"]) == ("NoCloudCredentials", 2)


class SilentService:
    """A TCP port that accepts connections and never answers: a metadata address
    behind a firewall that drops replies. ``connections`` counts who came."""

    def __init__(self):
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.connections.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def no_credentials(monkeypatch):
    """This process without the test server's credentials, its metadata address silent."""
    service = SilentService()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", service.url)
    yield service
    service.close()


def test_without_credentials_a_silent_metadata_service_is_probed_once_within_the_bound_and_named(
        s3_bucket, no_credentials, monkeypatch):
    from journal.store import cloud_credentials

    monkeypatch.setattr(cloud_credentials, "PROBE_SECONDS", 0.2)
    store = open_store(s3_bucket.url)

    with pytest.raises(Exception) as first:
        store.get("config")
    with pytest.raises(Exception) as again:
        list(store.list("manifests/"))

    assert type(first.value).__name__ == type(again.value).__name__ == "NoCloudCredentials"
    assert f"metadata service at {no_credentials.url} did not answer: no answer within 0.2 s" in str(first.value)
    wait_for(lambda: len(no_credentials.connections) >= 2, 30, "the probes' connections to be accepted")
    assert len(no_credentials.connections) == 2   # the probe of each request; obstore never asked it


def test_a_credential_source_in_the_environment_is_not_probed(s3_bucket, no_credentials, monkeypatch, tmp_path):
    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/journal")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9")

    with pytest.raises(Exception):
        open_store(s3_bucket.url).head("config")

    assert no_credentials.connections == []


def test_an_access_key_id_without_its_secret_is_named(s3_bucket, tmp_path):
    proc = _cli(s3_bucket.url, tmp_path, "log", AWS_ACCESS_KEY_ID="test")

    assert proc.returncode == 2
    assert "AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY" in one_line(proc)


def test_a_missing_bucket_and_a_plain_http_endpoint_are_named(s3_server, tmp_path):
    creds = {k: v for k, v in s3_server.env.items() if k.startswith("AWS_")}
    missing = _cli(s3_server.url("jt-no-such-bucket", "p"), tmp_path, "log", **creds)
    plain_http = _cli(s3_server.url("jt-no-such-bucket", "p").replace("&allow_http=true", ""), tmp_path, "log",
                      **creds)

    assert missing.returncode == plain_http.returncode == 1
    assert "bucket 'jt-no-such-bucket' does not exist there" in one_line(missing)
    assert "is plain http; add &allow_http=true to the store URL" in one_line(plain_http)


def one_line(proc: subprocess.CompletedProcess) -> str:
    (line,) = proc.stderr.splitlines()
    assert line.startswith("journal: error: ") and "Debug source" not in line
    return line
