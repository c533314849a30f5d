"""``docs/deploy.md`` does what it says: every block marked ``<!-- test: NAME -->`` runs.

A ``Site`` (the harness's ``Live``) stands in for the deployment: ``/data`` (the
bucket mount, shared by every container of a test), and per container
``/home/node``, ``/run/journal`` and ``/opt``, all under the test's temp dir (the only
paths the guide's text is moved by). The server is a stand-in ``node`` that appends
transcript lines until SIGTERM; ``journal`` is this checkout. The Dockerfile's
``ENV``, ``ENTRYPOINT`` and ``CMD`` and the start script run as written (the interval
shortened); its ``RUN`` lines build an image and are checked, not run. Each refusal is
produced for real by the command line, its message compared with the guide's heading,
and the fix under it run (under ``--long`` only, a fix word for word another's).
What only sets a scene (the checkpoints before a refusal, the checkpoint and verify
after its fix) runs in this process, through the library the command line calls. The S3 variant runs against S3 under ``--long`` only.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import Live, clean_env, describe, journal_script, wait_for
from journal.repository.repository import Repository
from journal.store import open_store
from journal.verify import verify

pytest_plugins = ["tests.s3server"]

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "deploy.md"
TESTED = re.compile(r"<!-- test: ([\w-]+)(?: ([\w-]+))? -->\n```(\w*)\n(.*?)\n```", re.S)
FENCE = re.compile(r"^```\w*\n", re.M)
HEADING = re.compile(r"^### `(.+)`", re.M)
MOVED = re.compile(r"(?<![\w./-])/(data|home/node|run/journal|opt)(?=/|\b)")
INTERVAL = "0.1"

NODE = """#!/bin/sh
# A stand-in for agent-manager's server: appends transcript lines until SIGTERM.
dir="$AM_LOCAL/codex-home/sessions/2026/03/01"
mkdir -p "$dir"
trap 'exit 0' TERM
i=0
while :; do
    printf '{"type":"event_msg","n":%d}\\n' "$i" >> "$dir/rollout-server.jsonl"
    i=$((i + 1))
    [ "$i" = 3 ] && : > "$SERVER_READY"
    sleep 0.05
done
"""


def doc_blocks() -> dict[str, tuple[str, str, str | None]]:
    """``{name: (language, text, the refusal heading above it)}`` of the tested blocks."""
    text = DOC.read_text()
    out = {}
    for m in TESTED.finditer(text):
        name = f"{m.group(1)} {m.group(2)}" if m.group(2) else m.group(1)
        headings = HEADING.findall(text[:m.start()])
        out[name] = (m.group(3), m.group(4), headings[-1] if m.group(1) == "refusal" else None)
    return out


BLOCKS = doc_blocks()


class Site(Live):
    """One container of the deployment (``name``); ``/data`` is shared under ``base``.
    ``fixtures``: its ``$AM_LOCAL`` starts with the real transcripts."""

    def __init__(self, base: Path, name: str = "space", *, fixtures: bool = False):
        self.base, self.root = base, base / name
        self.bin = self.root / "bin"
        self.run_dir = self.root / "run" / "journal"
        for d in (base / "data", self.bin, self.run_dir):
            d.mkdir(parents=True, exist_ok=True)
        (self.bin / "journal").write_text(f"#!/bin/sh\nexec {shlex.join(journal_script())} \"$@\"\n")
        (self.bin / "node").write_text(NODE)
        for tool in ("journal", "node"):
            (self.bin / tool).chmod(0o755)
        super().__init__(Path(self.move("/home/node")), self.move("/data/journal"), fixtures=fixtures, env={
            "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "AGENT_STATE_CHECKPOINT_SECONDS": INTERVAL, "SERVER_READY": str(self.run_dir / "server-ready")})

    def move(self, text: str) -> str:
        """The guide's text with its deployment paths under this site."""
        def where(m: re.Match) -> str:
            top = self.base / "data" if m.group(1) == "data" else self.root / m.group(1)
            return str(top)
        return MOVED.sub(where, text)

    def tick(self) -> None:
        """A checkpoint, in this process, of the store the environment names now."""
        result = self.checkpoint(open_store(self.cfg.store))
        assert result.seq is not None and not result.warnings, result

    def healthy(self) -> None:
        """A checkpoint succeeds and a full verify of the store finds nothing."""
        store = open_store(self.cfg.store)
        self.checkpoint(store)
        assert verify(Repository.open(store), full=True).ok

    def sh(self, name: str, env: dict | None = None, replace: dict | None = None) -> subprocess.CompletedProcess:
        """Run the guide's block ``name`` with ``bash -e``, each command echoed."""
        text = self.move(BLOCKS[name][1])
        for old, new in (replace or {}).items():
            assert old in text, f"the {name} block no longer says {old!r}"
            text = text.replace(old, new)
        proc = subprocess.run(["bash", "-e", "-x", "-c", text], env=clean_env({**self.env, **(env or {})}),
                              capture_output=True, text=True, timeout=300, cwd=self.root)
        assert proc.returncode == 0, f"the {name} block failed:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def legacy(self) -> None:
        """The shell design's layout: ``/data/state`` as agent-state.sh left it."""
        state = self.base / "data" / "state"
        rollout = state / "codex" / "sessions" / "2026" / "02" / "01" / "rollout-legacy.jsonl"
        rollout.parent.mkdir(parents=True)
        rollout.write_text("".join(json.dumps({"type": "event_msg", "n": i}) + "\n" for i in range(20)))
        (state / "codex" / "config.toml").write_text('model = "gpt-5"\n')
        claude = state / "claude" / "projects" / "-app" / "0a1b.jsonl"
        claude.parent.mkdir(parents=True)
        claude.write_text(json.dumps({"type": "user", "text": "hello"}) + "\n")


def test_every_block_of_the_guide_is_run_by_a_test():
    assert len(FENCE.findall(DOC.read_text())) == 2 * len(BLOCKS), "a fenced block of docs/deploy.md is not tested"
    assert sorted(BLOCKS) == sorted(KNOWN), "a tested block has no test here, or a test lost its block"


def dockerfile() -> tuple[list[str], dict[str, str], list[str], list[str]]:
    """(instructions, ENV, ENTRYPOINT + CMD, COPY destinations) of the guide's Dockerfile."""
    lines = BLOCKS["dockerfile"][1].replace("\\\n", " ").splitlines()
    env, argv, copies = {}, [], []
    for line in lines:
        op, _, rest = line.partition(" ")
        if op == "ENV":
            env.update(item.split("=", 1) for item in shlex.split(rest))
        elif op in ("ENTRYPOINT", "CMD"):
            argv += json.loads(rest)
        elif op == "COPY":
            copies.append(rest.split()[-1])
    return lines, env, argv, copies


def test_the_dockerfile_and_start_script_migrate_then_run_the_server_under_supervise(root):
    site = Site(root)
    site.legacy()
    lines, env, argv, copies = dockerfile()
    assert any(re.search(r"pip install /opt/journal-src$", ln) for ln in lines if ln.startswith("RUN"))
    assert env.pop("AGENT_STATE_CHECKPOINT_SECONDS") == "15" and env.pop("PATH").startswith("/opt/journal/bin:")
    site.env.update({k: site.move(v) for k, v in env.items()})
    start = Path(site.move("/opt/journal-start.sh"))
    assert site.move(argv[0]) == str(start) and "/opt/journal-start.sh" in copies
    start.parent.mkdir(parents=True)
    start.write_text(site.move(BLOCKS["start-script"][1]))
    start.chmod(0o755)
    metrics = site.run_dir / "metrics.prom"

    container = site.popen(*[site.move(a) for a in argv[1:]], cmd=[site.move(argv[0])], cwd=site.root,
                           start_new_session=True)
    try:
        wait_for(lambda: container.poll() is None and (site.run_dir / "server-ready").exists(), 60, "the server")
        wait_for(lambda: "journal_checkpoints_total 2" in (metrics.read_text() if metrics.exists() else ""),
                 60, "two checkpoints in the metrics file")
        status = json.loads(site.run("status", "--json", expect=0).stdout)
        unmount_for_a_while(site)
        container.send_signal(signal.SIGTERM)
        out, err = container.communicate(timeout=60)
    finally:
        if container.poll() is None:
            os.killpg(container.pid, signal.SIGKILL)
            container.wait()

    assert container.returncode == 0, out + err
    assert_logged_as_the_guide_shows(site, err)
    assert re.search(r"^migration complete: imported (codex, claude|claude, codex); checkpoint 1 verified$", out, re.M)
    assert status["running"] is True and status["last_checkpoint"]["seq"] >= 2
    export = root / "export"
    site.restore(to=export)
    rollout = export / "codex" / "sessions" / "2026" / "03" / "01" / "rollout-server.jsonl"
    lines_written = (site.local / "codex-home" / "sessions" / "2026" / "03" / "01" / "rollout-server.jsonl").read_text()
    assert rollout.read_text() == lines_written  # the final checkpoint holds every line the server wrote
    assert (export / "codex" / "sessions" / "2026" / "02" / "01" / "rollout-legacy.jsonl").is_file()


def unmount_for_a_while(site: Site) -> None:
    """``/data/journal`` goes away until two ticks failed, then comes back, and a tick
    succeeds (the guide's log shows it)."""
    status_file = site.state_dir / "status.json"

    def recorded() -> dict:
        try:
            return json.loads(status_file.read_text())
        except (OSError, ValueError):
            return {}

    aside = site.store_path.with_name("journal-unmounted")
    site.store_path.rename(aside)
    wait_for(lambda: recorded().get("failed_ticks", 0) >= 2, 60, "two failed ticks")
    aside.rename(site.store_path)
    wait_for(lambda: (st := recorded()).get("last_success", 0) > st.get("last_error_time", 0), 60, "a tick after it")


#: Which event a line of supervise's log is.
EVENT = re.compile(r"^(?:error: |warning: )?supervise: (started|checkpoint failed|recovered|final checkpoint)")


def log_shape(line: str) -> str:
    """A log line with what changes from run to run (numbers, ids, plurals, what a
    final checkpoint found) masked."""
    line = re.sub(r"\b[0-9a-f]{32}\b", "ID", line)
    line = re.sub(r"\d[\d,.]*", "N", line)
    line = re.sub(r"final checkpoint(?:: nothing changed since checkpoint N| N: .*? in Ns);", "final checkpoint ...;",
                  line)
    return re.sub(r"\b(file|object|byte|failure)s\b", r"\1", line.replace("directories", "directory"))


def assert_logged_as_the_guide_shows(site: Site, err: str) -> None:
    """Every line of the guide's log is one supervise wrote (up to numbers), and it shows
    every kind of line supervise wrote; its JSON form says the same lines."""
    logged = [line for line in err.splitlines() if EVENT.match(line)]
    shown = site.move(BLOCKS["log"][1]).splitlines()
    shapes = {log_shape(line) for line in logged}
    assert all(EVENT.match(line) and log_shape(line) in shapes for line in shown), (shown, logged)
    assert {EVENT.match(line)[1] for line in logged} == {EVENT.match(line)[1] for line in shown}, logged
    prefix = {"error": "error: ", "warning": "warning: "}
    for line in BLOCKS["log-json"][1].splitlines():
        doc = json.loads(line)
        assert set(doc) == {"time", "level", "event", "message", "fields"}, doc
        assert log_shape(prefix.get(doc["level"], "") + site.move(doc["message"])) in map(log_shape, shown), doc


def test_the_look_commands(root):
    site = Site(root, fixtures=True)
    site.tick()

    proc = site.sh("look")

    assert "last checkpoint: 1 at " in proc.stdout and "codex" in proc.stdout


def test_the_migration_commands(root):
    site = Site(root)
    site.legacy()

    proc = site.sh("migrate")

    assert re.search(r"^dry run: would import (codex, claude|claude, codex); nothing was changed$", proc.stdout, re.M)
    assert "migration complete" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("ok: ")


# --------------------------------------------------------------------------- refusals
# Each scene, on a site with the real transcripts: the checkpoints before (in this
# process), then the command the operator ran (the real command line); its result and
# the container that ran it.


def _edit(site: Site, model: str) -> None:
    (site.local / "codex-home" / "config.toml").write_text(f'model = "{model}"\n')


def _vanished(site: Site):
    site.tick()
    site.store_path.rename(site.store_path.with_name("unmounted"))
    _edit(site, "o3")
    return site.run("checkpoint"), site


def _no_local_state(site: Site):
    site.tick()
    fresh = Site(site.base, "new-container")
    (fresh.local / "codex-home").mkdir()
    _edit(fresh, "o3")
    return fresh.run("checkpoint"), fresh


def _conflict(site: Site):
    site.tick()
    other = Site(site.base, "old-replica")
    other.restore()
    _edit(site, "o3")
    site.tick()
    (other.local / "codex-home" / "notes.txt").write_text("written by the old replica\n")
    return other.run("checkpoint"), other


def _no_trees(site: Site):
    site.tick()
    forgot = Site(site.base, "forgot-am-local")
    del forgot.env["AM_LOCAL"]
    return forgot.run("restore"), forgot


def _foreign(site: Site):
    site.tick()
    other_store = site.move("/data/other")
    other = Site(site.base, "other", fixtures=True)
    other.env["JOURNAL_STORE"] = other_store
    other.tick()
    site.env["JOURNAL_STORE"] = other_store
    _edit(site, "o3")
    return site.run("checkpoint"), site


def _history_lost(site: Site):
    site.tick()
    _edit(site, "o3")
    site.tick()
    (site.store_path / "manifests" / "000000000002").unlink()
    _edit(site, "o4")
    return site.run("checkpoint"), site


def _deletions(site: Site):
    site.tick()
    next((site.local / "codex-home" / "sessions").rglob("*.jsonl")).unlink()
    return site.run("checkpoint"), site


KNOWN = {"dockerfile": None, "start-script": None, "log": None, "log-json": None, "look": None, "migrate": None,
         "s3": None, "gc": None, "cron": None, "copy": None, "dr-restore": None,
         "refusal vanished": _vanished, "refusal no-local-state": _no_local_state, "refusal conflict": _conflict,
         "refusal no-trees": _no_trees, "refusal foreign": _foreign, "refusal history-lost": _history_lost,
         "refusal deletions": _deletions}
REFUSALS = sorted(name for name in KNOWN if name.startswith("refusal "))


#: A refusal whose fix is word for word another's: a plain run checks its message and
#: that its block is that other one's, whose run it trusts; ``--long`` runs it too.
SAME_FIX = {"refusal conflict": "refusal no-local-state", "refusal history-lost": "refusal foreign"}


@pytest.mark.long(short="distinct fixes", full="every fix")
@pytest.mark.parametrize("name", REFUSALS, ids=[n.split()[1] for n in REFUSALS])
def test_each_refusal_says_what_the_guide_says_and_its_fix_works(root, name, long_size):
    trigger, where = KNOWN[name](Site(root, fixtures=True))

    said = trigger.stderr
    position = 0
    for piece in filter(None, (p.strip() for p in where.move(BLOCKS[name][2]).split("..."))):
        found = said.find(piece, position)
        assert found >= 0, f"the guide's heading says {piece!r}; journal said {said!r}"
        position = found + len(piece)
    assert said.count("\n") == 1, said   # one line
    if name in SAME_FIX and long_size != "every fix":
        assert BLOCKS[name][1] == BLOCKS[SAME_FIX[name]][1]
        return
    fixed = where.sh(name)
    assert "Traceback" not in fixed.stderr
    for var, value in re.findall(r"^export (\w+)=(\S+)$", where.move(BLOCKS[name][1]), re.M):
        where.env[var] = value   # as the operator's shell has it now
    where.healthy()


# --------------------------------------------------------------------------- S3, gc

#: What the S3 block says that a test must put its own endpoint's values in for.
S3_PLACEHOLDERS = ("s3://my-bucket/spaces/agent-1", "your-key-id", "your-secret")


def test_the_s3_block_names_its_bucket_and_credentials_as_placeholders():
    """A plain run's part of the S3 variant: the block says what the --long test fills in."""
    assert all(text in BLOCKS["s3"][1] for text in S3_PLACEHOLDERS)


@pytest.mark.long
def test_the_s3_variant_runs_against_s3(root, s3_bucket):
    site = Site(root, fixtures=True)
    creds = {k: v for k, v in s3_bucket.server.env.items() if not k.startswith("AWS_")}

    proc = site.sh("s3", env=creds, replace=dict(zip(S3_PLACEHOLDERS, (s3_bucket.url, "test", "test"))))

    assert "checkpoint 1: " in proc.stdout and "ok: " in proc.stdout
    assert any(key.startswith("manifests/") for key in s3_bucket.objects())


def test_the_gc_schedule(root):
    site = Site(root, fixtures=True)
    for n in range(3):
        _edit(site, f"m{n}")
        site.tick()

    proc = site.sh("gc")
    fields = BLOCKS["cron"][1].split(None, 5)
    assert len(fields) == 6 and all(re.fullmatch(r"[\d*/,-]+", f) for f in fields[:5])
    cron = subprocess.run(["bash", "-e", "-c", site.move(fields[5])], env=clean_env(site.env), capture_output=True,
                          text=True, timeout=120, cwd=site.root)

    assert "keep 3 checkpoints" in proc.stdout and cron.returncode == 0, cron.stderr


def test_an_hourly_copy_and_a_new_container_restoring_from_it(root):
    """The disaster-recovery section: the copy (to a directory here; to S3 in
    ``tests/test_copy.py``), then a new container whose store is the copy."""
    site = Site(root, fixtures=True)
    site.tick()
    _edit(site, "o3")
    site.tick()
    dr = {"s3://dr-bucket/agent-1": str(root / "dr")}

    copied = site.sh("copy", replace=dr)
    new = Site(root, "new")
    restored = new.sh("dr-restore", replace=dr)

    assert "would copy 2 checkpoint(s)" in copied.stdout and "copied 2 checkpoint(s)" in copied.stdout
    assert "restore complete" in restored.stdout + restored.stderr
    assert describe(new.local / "codex-home") == describe(site.local / "codex-home")
