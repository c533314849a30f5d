"""``journal verify --sample PERCENT [--seed N]``: ``--full``'s content checks on a
random share of the packs the checkpoints reach, drawn again alike by the same seed, so
an operator audits a large store a slice at a time."""

from __future__ import annotations

import json
import math

import pytest

from journal.repository.repository import Repository, blob_location, pack_of
from journal.store import open_store
from journal.verify import CORRUPT_OBJECT, sample_packs, verify

from conftest import Live, one_line_error
from test_gc import CountingStore
from test_stats import history  # noqa: F401  (the fixture: three checkpoints, a data and an index pack each)

CLAUDE = "projects/-home-node-work-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


def reached(live: Live) -> list[str]:
    """Every pack of the store: each was written by a checkpoint it holds (no orphan here)."""
    return sorted(live.repo().pack_sizes())


def blobs_in(live: Live, packs: set[str]) -> int:
    """The distinct blobs of the trees' entries stored in ``packs``."""
    return len({(r.pack, r.offset) for seq in (1, 2, 3) for tree in ("codex", "claude", "openclaw")
                for e in live.entries(tree, seq).values() for r in e.refs if r.pack in packs})


def seeds(packs: list[str], percent: float, pack: str) -> tuple[int, int]:
    """A seed whose sample holds ``pack`` and one whose sample does not."""
    draws = {seed: pack in sample_packs(packs, percent, seed) for seed in range(200)}
    return next(s for s, hit in draws.items() if hit), next(s for s, hit in draws.items() if not hit)


def test_a_sample_checks_the_drawn_packs_by_content_and_the_same_seed_draws_them_again(history):
    packs = reached(history)
    store = CountingStore(open_store(history.store_url))

    first = verify(Repository.open(store), sample=40, seed=11)
    again = verify(history.repo(), sample=40, seed=11)

    chosen = sample_packs(packs, 40, 11)
    assert len(packs) >= 5 and len(chosen) == math.ceil(len(packs) * 0.4) < len(packs)
    assert (first.seed, first.packs_sampled, first.packs_hashed) == (11, len(chosen), len(chosen))
    assert first.blobs == blobs_in(history, set(chosen)) and first.ok
    assert (again.packs_sampled, again.packs_hashed, again.blobs) == (first.packs_sampled, first.packs_hashed,
                                                                        first.blobs)
    sizes = history.repo().pack_sizes()
    whole = {pack_of(key) for key, start, end in store.gets if start == 0 and end == sizes.get(pack_of(key) or "")}
    assert set(chosen) <= whole, "every drawn pack is read whole, to hash it against its name"


def test_a_sample_finds_damage_in_a_drawn_pack_only(history):
    """Claude's transcript is stored once, in the first data pack: no blob of another
    pack is decoded against it (an appended segment is, against its entry's earlier ones)."""
    ref = history.entries("claude")[CLAUDE].refs[0]
    history.corrupt_blob(ref)
    hit, miss = seeds(reached(history), 34, ref.pack)

    found = history.run("verify", "--sample", "34", "--seed", str(hit), "--json", expect=1)
    passed = history.run("verify", "--sample", "34", "--seed", str(miss), expect=0)

    findings = json.loads(found.stdout)["findings"]
    assert [f["kind"] for f in findings] == [CORRUPT_OBJECT] and findings[0]["key"] == blob_location(ref)
    assert f"(--seed {miss} draws the same ones)" in passed.stdout
    assert passed.stdout.splitlines()[0].startswith("ok: 3 manifests")


def test_a_sample_without_a_seed_records_the_one_it_drew(history):
    drawn = verify(history.repo(), sample=50)

    again = verify(history.repo(), sample=50, seed=drawn.seed)

    assert drawn.seed is not None and drawn.packs_sampled == math.ceil(len(reached(history)) / 2)
    assert (again.packs_hashed, again.blobs) == (drawn.packs_hashed, drawn.blobs)


def test_a_sample_of_100_percent_checks_what_full_checks(history):
    full = verify(history.repo(), full=True)

    every = verify(history.repo(), sample=100, seed=1)

    assert (every.blobs, every.packs_hashed) == (full.blobs, full.packs_hashed) == (full.blobs, len(reached(history)))
    assert full.sample is None and full.packs_sampled == 0 and not every.full


@pytest.mark.parametrize(("args", "says"), [
    (("--seed", "3"), "--seed chooses the packs --sample checks; add --sample PERCENT"),
    (("--full", "--sample", "5"), "--full checks every pack and --sample a share of them"),
    (("--sample", "0"), "'--sample': 0.0 is not in the range 0<x<=100"),
    (("--sample", "101"), "'--sample': 101.0 is not in the range 0<x<=100"),
], ids=["seed alone", "full and sample", "zero", "past 100"])
def test_verify_refuses_a_sample_it_cannot_draw(history, args, says):
    proc = history.run("verify", *args, expect=2)

    assert says in one_line_error(proc)
