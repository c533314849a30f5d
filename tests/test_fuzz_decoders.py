"""Decoder fuzzing: every decoder of store bytes (the table ``tools/reliability/fuzz.py``
keeps, one row each) meets its contract on arbitrary and mutated inputs: it returns or
raises a ``JournalError``, never another exception, within ``TIME_BUDGET`` per input,
under ``RLIMIT_AS`` (its memory now plus ``MEMORY_BUDGET``), writing nothing.

Two drivers, one table: hypothesis (arbitrary bytes, and seeds mutated by draws it
shrinks) and the seeded mutation engine (``fuzz_row``, ~20 µs an input) that
``tools/torture.py --fuzz 100000`` runs. Both run in a forked child, so the memory
limit binds the decoder and not this process.
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from tools.reliability.fuzz import DECODERS, MEMORY_BUDGET, _alarm, check_one, fuzz, mutate  # noqa: E402
from tools.reliability.procs import run_forked  # noqa: E402

import msgspec  # noqa: E402

from journal.errors import CorruptObject  # noqa: E402
from journal.format.pagemap import decode_map  # noqa: E402

SEED = 26


def hypothesis_run(name: str, examples: int, derandomize: bool) -> int:
    """Drive decoder ``name`` with hypothesis in this process; the examples run."""
    import signal

    decoder = DECODERS[name]
    seeds = decoder.seeds()
    signal.signal(signal.SIGALRM, _alarm)
    mutated = st.tuples(st.sampled_from(seeds), st.randoms(use_true_random=False)).map(
        lambda pair: mutate(pair[0], decoder.shape, pair[1], seeds))
    ran = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=2048), mutated, st.sampled_from(seeds)))
    def meets_the_contract(data):
        ran.append(1)
        problem, _seconds, _refused = check_one(decoder, data)
        assert problem is None, f"{name}: {problem} on {data[:200]!r}"

    meets_the_contract()
    return len(ran)


def run_hypothesis(name: str, examples: int, derandomize: bool) -> None:
    out = run_forked(lambda: hypothesis_run(name, examples, derandomize), memory=MEMORY_BUDGET + (256 << 20))
    assert out.ok, out.message
    assert out.value >= examples // 2


@pytest.mark.parametrize("name", DECODERS)
def test_a_decoder_meets_its_contract_on_inputs_hypothesis_draws(name):
    run_hypothesis(name, 40, derandomize=True)


@pytest.mark.parametrize("name", DECODERS)
def test_a_decoder_meets_its_contract_on_mutated_inputs(name, tmp_path):
    (result,) = fuzz(400, seed=SEED, names=[name], workdir=tmp_path)
    assert [f.line() for f in result.findings] == []
    assert result.inputs == 400


def refused_seeds() -> list[tuple[str, int]]:
    import signal

    signal.signal(signal.SIGALRM, _alarm)
    return [(name, i) for name, decoder in DECODERS.items() for i, data in enumerate(decoder.seeds())
            if check_one(decoder, data)[2]]


def test_every_seed_decodes():
    """The seeds are valid objects (the page walk's inner page aside: a tree whose every
    page is that inner page is refused), so mutations start from what journal accepts."""
    out = run_forked(refused_seeds)  # check_one's timer is SIGALRM, which pytest-timeout uses here
    assert out.ok and out.value == [("page-walk", 1)], out.message


def test_a_decoder_that_breaks_the_contract_is_caught(tmp_path, monkeypatch):
    """The harness finds what it looks for: an untyped exception, and a runaway."""
    from tools.reliability import fuzz as fuzz_mod

    broken = fuzz_mod.Decoder("broken", lambda data: data[:1].decode("ascii") and data.index(b"\xff"),
                              lambda: [b"ok"], "json")
    monkeypatch.setitem(fuzz_mod.DECODERS, "broken", broken)
    (result,) = fuzz(50, seed=SEED, names=["broken"], workdir=tmp_path)
    assert result.findings and result.findings[0].problem.startswith(("ValueError", "UnicodeDecodeError"))


@pytest.mark.long
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("name", DECODERS)
def test_a_decoder_meets_its_contract_long(name, tmp_path):
    run_hypothesis(name, 3000, derandomize=False)
    (result,) = fuzz(100_000, seed=SEED, names=[name], workdir=tmp_path)
    assert [f.line() for f in result.findings] == []


def test_a_page_map_with_an_unknown_field_nested_past_the_decoders_depth_is_corrupt():
    """Found by ``make torture`` (seed 38040, fuzz page-map inputs 61551 and 87296):
    msgspec skips an unknown field by recursing, so one nested deep enough raised
    ``RecursionError`` out of the page map's decoder instead of ``CorruptObject``."""
    head = msgspec.msgpack.encode({"version": 3, "full": True, "page_size": 4096, "page_count": 0, "packs": [],
                                   "records": b"", "x": None})
    assert head.endswith(b"\xc0")
    deep = head[:-1] + b"\x91" * 100_000 + b"\xc0"
    with pytest.raises(CorruptObject, match="nested too deep"):
        decode_map(deep, "a" * 64, "pagemap x")
