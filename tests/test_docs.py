"""The documentation says what the code and the benchmark say.

* The README's performance figures are the current run's of ``docs/benchmarks.md``
  (its "Current results" section): a new run that moves a figure fails here until the
  README quotes it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def flat(text: str) -> str:
    """Text with every run of whitespace (line breaks included) as one space."""
    return re.sub(r"\s+", " ", text)


def bench_section(heading: str, until: str) -> str:
    text = BENCHMARKS.read_text()
    start = text.index(heading)
    return flat(text[start:text.index(until, start + len(heading))])


def current() -> str:
    return bench_section("## Current results", "\n## ")


def tree_20k() -> str:
    section = current()
    return section[section.index("| 20,000-file tree |"):]


def ninth() -> str:
    return bench_section("### Ninth run", "\n### Eighth run")


def gc_peak() -> str:
    """The largest peak RSS of the gc runs over 1,000,000 objects."""
    rows = re.findall(r"\| 1,000,000 objects: gc[^|]*\|(?:[^|]*\|){6} (\d+) MiB \|", current())
    assert len(rows) == 3, rows
    return f"{max(map(int, rows))} MiB"


# (what, the README's sentence capturing the figure(s), where the benchmark says it, its pattern)
FIGURES = [
    ("idle tick in supervise", r"re-stats: (\S+ ms) in `journal supervise`", current,
     r"journal's idle tick in-process \([^)]*\): (\S+ ms)"),
    ("benchmark's files", r"for the benchmark's (\d+) files", current,
     r"\| initial checkpoint \| legacy \| \S+ MiB \| (\d+) \|"),
    ("idle tick from cron", r"and (\S+ ms) for `journal checkpoint` from cron", current,
     r"\| idle tick \| journal \| 0 B \| 0 \| (\S+ ms) \|"),
    ("legacy idle tick", r"against (\S+ ms) for the legacy rsync tick", current,
     r"\| idle tick \| legacy \| 0 B \| 0 \| (\S+ ms) \|"),
    ("20,000 files from the CLI", r"the re-stat is the cost: (\S+ ms) from the CLI", tree_20k,
     r"\| idle tick \| journal \| 0 B \| 0 \| (\S+ ms) \|"),
    ("20,000 files in supervise", r"two processes, and (\S+ ms) in `journal supervise`", current,
     r"journal's 20,000-file idle tick in-process: (\S+ ms)"),
    ("20,000 files, legacy", r"against (\S+ ms) for the legacy tick\.", tree_20k,
     r"\| idle tick \| legacy \| 0 B \| 0 \| (\S+ ms) \|"),
    ("active tick", r"that is (\S+ KiB) a tick", current, r"\| active tick \(mean\) \| journal \| (\S+ KiB) \|"),
    ("legacy active tick", r"against (\S+ MiB) for the legacy rsync design", current,
     r"\| active tick \(mean\) \| legacy \| (\S+ MiB) \|"),
    ("restic active tick", r"and (\S+ KiB) for restic", current, r"\| active tick \(mean\) \| restic \| (\S+ KiB) \|"),
    (".claude.json rewrite (ninth run)", r"makes a tick of (~\S+ KiB), manifest and index included, instead of "
     r"(~\S+ KiB)", ninth, r"a 560 KB `.claude.json` with one value changed: (~\S+ KiB) -> (~\S+ KiB)"),
    ("2 GiB checkpoint", r"a 2,048 MiB file takes (\S+ MiB) to checkpoint", current,
     r"\| journal checkpoint \| \S+ s \| \S+ s \| (\S+ MiB) \|"),
    ("2 GiB restore", r"and (\S+ MiB) to restore", current, r"\| journal restore \| \S+ s \| \S+ s \| (\S+ MiB) \|"),
    ("restored state", r"the benchmark's (\S+ MiB) of state", current,
     r"\| initial checkpoint \| legacy \| (\S+ MiB) \|"),
    ("restore in supervise", r"takes (\S+ ms) inside `journal supervise`", current,
     r"journal's full restore in-process \([^)]*\): (\S+ ms)"),
    ("restore ratio", r"\((\S+x) the \S+ ms of an `rsync -a`", current,
     r"as `journal supervise` runs it \(in-process\): wall <= 1.0x the `rsync -a` time: journal \S+ s vs "
     r"rsync \S+ s = (\S+x)"),
    ("rsync -a", r"the (\S+ ms) of an `rsync -a`", current, r"\| full restore \| rsync -a \| \| \| (\S+ ms) \|"),
    ("restore from a shell", r"and (\S+ ms) as `journal restore` from a shell", current,
     r"\| full restore \| journal \| \| \| (\S+ ms) \|"),
    ("gc memory", r"Its peak memory is (\S+ MiB) for a million objects", gc_peak, None),
]


@pytest.mark.parametrize(("what", "readme", "section", "pattern"), FIGURES, ids=[f[0] for f in FIGURES])
def test_readme_figures_are_the_current_benchmark_runs(what, readme, section, pattern):
    said = re.findall(readme, flat(README.read_text()))
    assert len(said) == 1, f"the README should say the {what} figure once: {readme!r} matched {said}"
    if pattern is None:
        measured = section()
    else:
        found = re.search(pattern, section())
        assert found, f"docs/benchmarks.md no longer says the {what} figure as {pattern!r}"
        measured = found.group(1) if found.re.groups == 1 else found.groups()
    quoted = said[0]
    if isinstance(measured, tuple):   # two figures, said in either order
        assert sorted(quoted) == sorted(measured), f"{what}: the README says {quoted}, the benchmark {measured}"
    else:
        assert quoted == measured, f"{what}: the README says {quoted}, the benchmark's current run {measured}"
