"""A gc that has lost its lease sends no further deletion request.

When a bulk delete fails (throttling, a timeout, a 5xx after obstore's retries), the
cloud backend redoes it key by key, one request each; before each of those it calls
the sweep's guard, which checks the lease (design §16, "Bulk deletes").

Here S3 (moto's server, real HTTP) throttles every multi-key DeleteObjects request with
503 SlowDown, as S3 does under load; single-key deletes go through. At the first
single-key delete another gc takes the lease: no deletion request may follow.
"""

from __future__ import annotations

import io
import re

import msgspec
import pytest

from test_store_s3 import _checkpoints_and_orphans

pytest_plugins = ["tests.s3server"]


def test_a_lease_lost_during_a_throttled_bulk_delete_stops_the_deletions(s3_bucket, tmp_path):
    from journal.gc.run import gc
    from journal.gc.lease import LEASE_KEY, LeaseLost, LeaseRecord
    from journal.repository.repository import PACK_PREFIX, Repository
    from journal.gc.retention import Policy

    cfg, store, tree, orphans = _checkpoints_and_orphans(s3_bucket, tmp_path, 20)
    repo = Repository.open(store)
    keep_all = Policy(keep_last=10)  # no manifest expires: the sweep's only batch is the orphans
    gc(repo, keep_all, 3600.0)  # the mark
    (tree / "a.txt").write_text("version 4\n")
    from journal.checkpoint.run import checkpoint
    assert checkpoint(cfg, store).seq == 4  # past the mark: the orphans may go

    server = s3_bucket.server._server._server
    real_app = server.app
    lease_key = f"{s3_bucket.prefix}/{LEASE_KEY}"
    log = {"stolen": False, "after": []}

    def app(environ, start_response):
        if environ["REQUEST_METHOD"] == "POST" and environ.get("QUERY_STRING", "").startswith("delete"):
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            keys = re.findall(rb"<Key>([^<]*)</Key>", body)
            if len(keys) > 1:  # S3 throttling a bulk delete
                start_response("503 Slow Down", [("Content-Type", "application/xml")])
                return [b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"]
            if log["stolen"]:
                log["after"].append(keys[0].decode())
            elif keys and b"/packs/" in keys[0]:
                # Another gc takes the lease now (as it would once this one's expired).
                other = LeaseRecord(holder="host other pid 1", token="f" * 32, acquired_ns=0, expires_ns=2 ** 62)
                s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=lease_key, Body=msgspec.json.encode(other))
                log["stolen"] = True
        return real_app(environ, start_response)

    server.app = app
    try:
        with pytest.raises(LeaseLost, match="lost its lease"):  # at its next check, before the next request
            gc(repo, keep_all, 0.0)
    finally:
        server.app = real_app

    assert log["stolen"], "the sweep never fell back to single deletes"
    gone = set(orphans) - set(store.list(PACK_PREFIX))
    assert log["after"] == [], (f"{len(log['after'])} deletion requests sent after another gc took the lease "
                                f"({len(gone)} of {len(orphans)} orphans deleted)")
