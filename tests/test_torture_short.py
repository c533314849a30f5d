"""The short form of the torture run and the kill sweeps (``tools/reliability/``).

``make test`` runs a few trials on the local store and on hf-mount's rules, and a few
kill points spread over each of checkpoint, gc and restore; the ``long`` tests are the
full form ``make torture`` runs from ``tools/torture.py`` (500 and 200 trials, every
kill point). Every trial and point is checked against the invariants of
``tools/reliability/checks.py`` and ``afterwards.py``; a failure names the seed and the
trial or point, and ``tools/torture.py --seed S --trial N`` replays a trial.
"""

from __future__ import annotations

import errno
import os

import pytest

from journal.errors import StoreError
from tools.reliability import trials as trials_mod
from tools.reliability.faults import FaultFs, KillHook, open_faulty, parse_fault
from tools.reliability.procs import run_forked
from tools.reliability.sweeps import OPERATIONS, Sweep
from tools.reliability.trials import Torture

SEED = 26


def run_trials(tmp_path, store: str, trials: int, seed: int = SEED):
    torture = Torture(tmp_path / store, store, seed)
    try:
        tally = torture.run(trials)
    finally:
        torture.close()
    assert [v.line() for v in tally.violations] == []
    return tally


def test_trials_on_the_local_store_keep_every_invariant(tmp_path):
    tally = run_trials(tmp_path, "local", 10)
    assert tally.trials == 10 and tally.kills > 0 and tally.faults > 0, tally.line()


def test_trials_on_hf_mount_rules_keep_every_invariant(tmp_path):
    tally = run_trials(tmp_path, "hfsim", 4, seed=SEED + 1)
    assert tally.kills + tally.faults > 0, tally.line()


@pytest.mark.parametrize("operation", OPERATIONS)
def test_kill_sweep_points_spread_over_the_operation(tmp_path, operation):
    result = Sweep(tmp_path, operation, seed=SEED).run(limit=3)
    assert result.problems == []
    assert result.points == 3 and result.kills >= 2, result.line()


def test_a_supervised_writer_killed_with_supervise_loses_nothing_older_than_two_ticks(tmp_path):
    torture = Torture(tmp_path, "local", SEED, actions={"supervise": 1})
    tally = torture.run(1)
    assert [v.line() for v in tally.violations] == [] and tally.kills == 1


# --- the harness does what it says ---------------------------------------------------

def test_a_fault_is_parsed_and_refused_when_malformed():
    assert parse_fault("enospc@3") == ("enospc", 3)
    for bad in ("enospc", "enospc@0", "fire@1", "eio@x"):
        with pytest.raises(ValueError, match="expected one of"):
            parse_fault(bad)


def test_an_enospc_fault_fails_the_nth_store_write_with_a_store_error(tmp_path):
    store = open_faulty(str(tmp_path / "store"), "enospc@2")
    store.put_if_absent("config", b"one")
    with pytest.raises(StoreError, match="No space left on device"):
        store.put_if_absent("manifests/000000000001", b"two")
    assert isinstance(store.fs, FaultFs) and store.fs.fired
    assert not (tmp_path / "store" / "manifests" / "000000000001").exists()
    assert os.listdir(tmp_path / "store" / ".tmp") == []


def test_a_landed_fault_publishes_the_object_then_fails(tmp_path):
    store = open_faulty(str(tmp_path / "store"), "landed@1")
    with pytest.raises(StoreError, match="after the object landed"):
        store.put_if_absent("config", b"one")
    assert (tmp_path / "store" / "config").read_bytes() == b"one"


def test_the_kill_hook_counts_file_system_calls_and_kills_at_the_nth(tmp_path):
    def three_writes():
        for i in range(3):
            with open(tmp_path / f"f{i}", "wb") as fh:
                fh.write(b"x")
        return "done"

    counted = run_forked(three_writes, count=True)
    assert counted.ok and counted.calls == 3
    killed = run_forked(three_writes, kill_at=2)
    assert killed.status == "killed"
    assert sorted(os.listdir(tmp_path)) == ["f0", "f1", "f2"]  # the counted run's files
    hook = KillHook().install()
    try:
        os.close(os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT, 0o600))
        os.close(os.open(tmp_path / "g", os.O_RDONLY))  # a read is not counted
    finally:
        hook.remove()
    assert hook.count == 1


def test_an_error_the_operation_raises_comes_back_typed_and_anything_else_as_a_crash():
    def store_error():
        raise StoreError("put object: x: boom")

    def os_error():
        raise OSError(errno.EIO, "raw")

    assert run_forked(store_error).error == "StoreError"
    crash = run_forked(os_error)
    assert crash.status == "crash" and "OSError" in crash.message


def test_torture_prints_one_summary_line_and_exits_0_when_nothing_broke(tmp_path, capsys):
    import tools.torture as torture_cli

    assert torture_cli.main(["--trials", "1", "--seed", "3", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [out[-1]] and out[-1].startswith("torture: 1 trials on the local store, ")
    assert out[-1].endswith(" 0 violations")


def test_torture_exits_1_naming_the_seed_and_trial_of_a_violation(tmp_path, monkeypatch, capsys):
    import tools.torture as torture_cli

    def broken(self):
        self.violation("the restored transcript lost a line")

    monkeypatch.setattr(trials_mod._Trial, "run", broken)
    assert torture_cli.main(["--trials", "2", "--seed", "41", "--workdir", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("VIOLATION trial 0 (") and "the restored transcript lost a line" in out[0]
    assert out[0].endswith("[replay: tools/torture.py --store local --seed 41 --trial 0]")
    assert out[-1].endswith(", 2 violations")


def test_torture_runs_the_lineage_model_and_prints_one_summary_line(tmp_path, monkeypatch, capsys):
    import tools.reliability.lineage as lineage
    import tools.torture as torture_cli

    monkeypatch.setattr(lineage, "STEPS", 4)
    assert torture_cli.main(["--trials", "0", "--lineage", "1", "--seed", "3", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [out[-1]] and out[-1].startswith("lineage: 1 examples of up to 4 steps on 2-3 containers ")
    assert out[-1].endswith(" 0 violations")


def test_torture_names_a_lineage_violation_with_its_saved_steps_and_exits_1(tmp_path, monkeypatch, capsys):
    import test_model_lineage
    import tools.reliability.lineage as lineage
    import tools.torture as torture_cli

    monkeypatch.setattr(lineage, "STEPS", 2)
    for where in ("stored", "on_disks"):  # no checkpoint and no disk holds anything: every line is lost
        monkeypatch.setattr(test_model_lineage.LineageModel, where, lambda self, *args: set())
    assert torture_cli.main(["--trials", "0", "--lineage", "2", "--seed", "5", "--workdir", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("VIOLATION lineage (seed 5): AssertionError: lines or rows in no listed checkpoint")
    assert out[0].endswith("; replay: tools/torture.py --seed 5 --trials 0 --lineage 2]")
    saved = tmp_path / "lineage" / "lineage-5-0.txt"
    assert f"[steps saved as {saved};" in out[0] and "state.start(" in saved.read_text()
    assert out[-1].startswith("lineage: 2 examples of up to 2 steps ") and out[-1].endswith(", 1 violations")


# --- the long form: what `make torture` runs from tools/torture.py -------------------

@pytest.mark.long
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("store,trials", [("local", 100), ("hfsim", 50)])
def test_trials_long(tmp_path, store, trials):
    run_trials(tmp_path, store, trials, seed=SEED * 100)


@pytest.mark.long
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_kill_sweep_at_every_call(tmp_path, operation):
    result = Sweep(tmp_path, operation, seed=SEED).run()
    assert result.problems == [] and result.points == result.calls, result.line()
