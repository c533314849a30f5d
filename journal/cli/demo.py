"""``journal demo``: the whole loop on a generated agent-state tree and a local store.

1. generate a small agent-state tree (Codex, Claude Code, Gemini, OpenClaw) in a work dir;
2. checkpoint while a child process appends to a Codex rollout it holds open;
3. SIGKILL the child mid-line, wipe the live tree, restore and verify;
4. return what happened: lines written and restored, the torn line kept out, objects and bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import msgspec

from ..checkpoint.run import checkpoint
from ..config import load_config
from ..errors import ConfigError
from ..report import SILENT, Reporter
from ..repository.repository import Repository
from ..restore.run import restore
from ..store import open_store
from ..verify import verify
from .output import count

ROLLOUT = "codex-home/sessions/2026/12/02/rollout-2026-12-02T10-00-00-0193a6f0-demo.jsonl"
#: A file of the tree the codex preset leaves out (a rebuildable cache): never checkpointed.
CACHE = "codex-home/logs_2.sqlite"

# The child: holds the rollout open for its whole life, appends a line every 20 ms
# (flush, no fsync, no close), then starts one more line and hangs mid-write.
_CHILD = r"""
import json, sys, time
path, lines = sys.argv[1], int(sys.argv[2])
with open(path, "a", encoding="utf-8") as fh:
    for i in range(lines):
        item = {"timestamp": "2026-12-02T10:00:%02d.%03dZ" % (i // 50, i % 50 * 20), "type": "response_item",
                "payload": {"type": "message", "role": "assistant", "seq": i,
                            "content": [{"type": "output_text", "text": "step %d of the plan " % i * 8}]}}
        fh.write(json.dumps(item) + "\n"); fh.flush(); time.sleep(0.02)
    fh.write('{"timestamp": "2026-12-02T10:01:00.000Z", "type": "event_msg", "payload": {"type": "tok')
    fh.flush(); print("torn", flush=True); time.sleep(3600)
"""


class DemoResult(msgspec.Struct, kw_only=True):
    ok: bool = False
    workdir: str = ""
    lines_written: int = 0
    lines_restored: int = 0
    torn_bytes: int = 0
    torn_restored: bool = False
    checkpoints: list[dict] = []
    idle_objects: int = -1
    verify_findings: int = -1
    lines: list[str] = []


def run_demo(workdir: str | None = None, reporter: Reporter = SILENT, child_lines: int = 60) -> DemoResult:
    """Run the demo in ``workdir`` (kept), or in a fresh temp dir removed at the end,
    and return what happened."""
    if workdir is not None:
        return _run(workdir, reporter, child_lines)
    work = tempfile.mkdtemp(prefix="journal-demo-")
    try:
        result = _run(work, reporter, child_lines)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.lines.insert(-1, f"work dir {work} removed (`journal demo --dir DIR` keeps it)")
    return result


def _run(work: str, reporter: Reporter, child_lines: int) -> DemoResult:
    local, store_dir = os.path.join(work, "local"), os.path.join(work, "store")
    for path in (local, store_dir):  # a demo never deletes or mixes with existing data
        if os.path.lexists(path) and not (os.path.isdir(path) and not os.listdir(path)):
            raise ConfigError(f"demo: {path} already exists and is not an empty directory; "
                              "pass a new --dir (the demo never overwrites anything)")
    result = DemoResult(workdir=work)
    say = result.lines.append
    files = generate_tree(local)
    cfg = load_config(env={"AM_LOCAL": local, "JOURNAL_STORE": store_dir, "HOME": work})
    say(f"work dir {work}: {count(files, 'file')} in {count(len(cfg.trees), 'tree')} "
        f"({', '.join(t.name for t in cfg.trees)}), "
        f"store {store_dir}")
    rollout = os.path.join(local, ROLLOUT)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, rollout, str(child_lines)],
                             stdout=subprocess.PIPE, text=True)
    try:
        for delay in (0.2, 0.4, 0.4):
            time.sleep(delay)
            _tick(cfg, reporter, result, "while the child appends")
        child.stdout.readline()  # "torn": the child is now stuck in the middle of a line
        _tick(cfg, reporter, result, "with the child mid-line")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    idle = checkpoint(cfg, open_store(cfg.store), reporter)
    result.idle_objects = idle.objects
    say(f"child killed with SIGKILL; an idle checkpoint then uploaded {count(idle.objects, 'object')}")
    with open(rollout, "rb") as fh:
        live = fh.read()
    result.lines_written = live.count(b"\n")
    result.torn_bytes = len(live) - (live.rfind(b"\n") + 1)
    shutil.rmtree(local)
    say(f"live tree wiped: {count(result.lines_written, 'complete line')} and a torn tail of "
        f"{count(result.torn_bytes, 'byte')} were in the rollout")
    restored = restore(cfg, open_store(cfg.store), reporter)
    with open(rollout, "rb") as fh:
        back = fh.read()
    result.lines_restored = back.count(b"\n")
    result.torn_restored = not back.endswith(b"\n")
    for line in back.splitlines():
        json.loads(line)
    files = sum(sum(t.actions.values()) for t in restored.trees)
    dirs = sum(sum(t.directories.values()) for t in restored.trees)
    say(f"restored {count(files, 'file')} and {count(dirs, 'directory')} from checkpoint {restored.seq} "
        f"(every file but {CACHE}, a log the codex preset leaves out): "
        f"{count(result.lines_restored, 'line')} in the rollout, every one valid JSON; torn line "
        f"{'RESTORED (bad)' if result.torn_restored else 'kept out'}")
    found = verify(Repository.open(open_store(cfg.store), key=cfg.key), full=True)
    result.verify_findings = len(found.errors)
    say(f"verify --full: {count(found.manifests, 'manifest')}, {count(found.blobs, 'blob')} hashed, "
        f"{count(len(found.errors), 'error')}")
    result.ok = (restored.complete and result.lines_restored == result.lines_written
                 and back == live[: len(back)] and not result.torn_restored
                 and result.idle_objects == 0 and found.ok)
    say("demo OK" if result.ok else "demo FAILED")
    return result


def _tick(cfg, reporter, result: DemoResult, when: str) -> None:
    r = checkpoint(cfg, open_store(cfg.store), reporter)
    with open(os.path.join(cfg.local, ROLLOUT), "rb") as fh:
        lines = fh.read().count(b"\n")
    result.checkpoints.append({"seq": r.seq, "objects_uploaded": r.objects, "bytes_uploaded": r.bytes,
                               "rollout_lines": lines})
    result.lines.append(f"checkpoint {r.seq} {when}: {count(r.objects, 'object')} and {count(r.bytes, 'byte')} "
                        f"uploaded (rollout has {count(lines, 'complete line')})")


def generate_tree(local: str) -> int:
    """Write a small, realistic agent-state tree under ``local``; returns the file count."""
    sid = "0193a6f0-demo"
    files = {
        "codex-home/auth.json": json.dumps({"OPENAI_API_KEY": None, "tokens": {"id_token": "demo"}}),
        "codex-home/config.toml": 'model = "gpt-5.3-codex"\napproval_policy = "on-request"\n',
        "codex-home/history.jsonl": "".join(json.dumps({"session_id": sid, "ts": 1764669600 + i,
                                                        "text": f"prompt {i}"}) + "\n" for i in range(5)),
        CACHE: "not copied: a log",
        ROLLOUT: json.dumps({"timestamp": "2026-12-02T10:00:00.000Z", "type": "session_meta",
                             "payload": {"id": sid, "cwd": "/home/node/work", "originator": "codex_cli_rs",
                                         "cli_version": "0.104.0", "instructions": "x" * 2000}}) + "\n",
        "agent-state/claude/.claude.json": json.dumps({"numStartups": 3, "projects": {"/home/node/work": {}}}),
        "agent-state/claude/projects/-home-node-work/4f1c-demo.jsonl": "".join(
            json.dumps({"parentUuid": None if i == 0 else f"u{i - 1}", "isSidechain": False, "userType": "external",
                        "cwd": "/home/node/work", "sessionId": "4f1c-demo", "version": "2.1.39",
                        "type": "user" if i % 2 == 0 else "assistant", "uuid": f"u{i}",
                        "message": {"role": "user" if i % 2 == 0 else "assistant", "content": "hello " * 40},
                        "timestamp": f"2026-12-02T09:00:{i:02d}.000Z"}) + "\n" for i in range(20)),
        "agent-state/gemini-home/.gemini/tmp/7f3a/chats/session-2026-12-02T09-00-7f3a.jsonl": "".join(
            json.dumps({"id": f"m{i}", "type": "gemini" if i % 2 else "user", "content": "hi " * 30}) + "\n"
            for i in range(10)),
        "agent-state/gemini-home/.gemini/logs.json": json.dumps([{"sessionId": "7f3a", "message": "hi"}]),
        "oc-home/.openclaw/agents/main/sessions/sessions.json": json.dumps({"main": {"sessionId": "9e2b"}}),
        "oc-home/.openclaw/agents/main/sessions/9e2b.jsonl": "".join(
            json.dumps({"type": "message", "timestamp": f"2026-12-02T08:00:{i:02d}Z",
                        "message": {"role": "user", "content": [{"type": "text", "text": "ok " * 20}]}}) + "\n"
            for i in range(15)),
    }
    for rel, text in files.items():
        path = os.path.join(local, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    return len(files)
