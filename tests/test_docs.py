"""The documentation says what the code and the benchmark say.

* ``docs/cli.md`` and the README's table of commands are what ``tools/gen_cli_docs.py``
  makes of the click commands now, and name every command and option (as sqlite-utils
  checks its docs): a new command or option fails here until the tool is rerun.
* ``docs/config.md`` is what ``tools/gen_config_docs.py`` makes of the config file's
  types now, has a row for every key, and its example file sets every key and loads.
* Shell completion works as documented (click's ``_JOURNAL_COMPLETE``).
* The README's performance figures are the current run's of ``docs/benchmarks.md``
  (its "Current results" section), or, for one the README dates, of that run in
  ``docs/benchmarks-log.md``: a new run that moves a figure fails here until the README
  quotes it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Annotated

import click
import msgspec
import pytest

from journal.config import ConfigFile, TreeFile, load_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
BENCHMARKS_LOG = ROOT / "docs" / "benchmarks-log.md"
CLI_MD = ROOT / "docs" / "cli.md"
CONFIG_MD = ROOT / "docs" / "config.md"


def tool(name: str):
    """``tools/<name>.py``, loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = tool("gen_cli_docs")
COMMANDS = [(path, cmd) for path, cmd, _ in GEN.walk(GEN.main_group(), GEN.root_context())]
CONFIG_GEN = tool("gen_config_docs")
#: Every key of the config file: (its table in docs/config.md, its name).
CONFIG_KEYS = [(table, field.encode_name) for table, cls in (("top", ConfigFile), ("trees", TreeFile))
               for field in msgspec.inspect.type_info(cls).fields]


def test_the_cli_reference_and_the_readme_table_are_what_the_tool_makes_now():
    assert CLI_MD.read_text() == GEN.cli_md(), "docs/cli.md is out of date: run tools/gen_cli_docs.py"
    assert README.read_text() == GEN.readme_with_table(README.read_text()), \
        "the README's table of commands is out of date: run tools/gen_cli_docs.py"


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_command_and_option_is_in_the_cli_reference_and_the_readme(path, cmd):
    reference = CLI_MD.read_text()
    heading = f"\n## journal {path}\n"
    assert heading in reference, f"docs/cli.md has no section for `journal {path}`"
    section = reference.split(heading, 1)[1].split("\n## ", 1)[0]
    row = next((ln for ln in README.read_text().splitlines() if ln.startswith(f"| `journal {path}` |")), None)
    assert row is not None, f"the README's table of commands has no row for `journal {path}`"
    for param in cmd.params:
        if isinstance(param, click.Option) and not param.hidden:
            for name in param.opts + param.secondary_opts:
                assert name in section, f"docs/cli.md does not document {name} of `journal {path}`"
            longest = max(param.opts + param.secondary_opts, key=len)
            assert longest in GEN.COMMON or f"`{longest}`" in row, f"the README's row of `journal {path}` lacks {longest}"


def test_the_config_reference_is_what_the_tool_makes_now():
    assert CONFIG_MD.read_text() == CONFIG_GEN.config_md(), "docs/config.md is out of date: run tools/gen_cli_docs.py"


@pytest.mark.parametrize(("table", "key"), CONFIG_KEYS, ids=[f"{t}.{k}" for t, k in CONFIG_KEYS])
def test_every_key_of_the_config_file_is_in_the_config_reference(table, key):
    top, trees = CONFIG_MD.read_text().split("\n## `[[trees]]`\n", 1)
    row = next((ln for ln in (trees if table == "trees" else top).splitlines() if ln.startswith(f"| `{key}` |")), None)
    assert row is not None, f"docs/config.md has no row for the config key {key!r}: run tools/gen_cli_docs.py"
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert len(cells) == 5 and all(cells), f"docs/config.md's row of {key!r} lacks its type, default or text: {row}"


def test_the_config_reference_example_sets_every_key_and_loads(tmp_path):
    example = CONFIG_MD.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "config.toml"
    path.write_text(example)

    decoded = msgspec.toml.decode(example.encode(), type=ConfigFile)
    cfg = load_config(str(path), env={"HOME": str(tmp_path)})

    unset = [f for f in ConfigFile.__struct_fields__ if getattr(decoded, f) == getattr(ConfigFile(), f)]
    unset += [f for f in TreeFile.__struct_fields__ if getattr(decoded.trees[0], f) == getattr(TreeFile(name=""), f)]
    assert unset == [], f"the example file leaves out {unset}"
    assert (cfg.store, cfg.source, cfg.chunk_copies_limit) == ("/data/journal", str(path), 16 << 20)
    assert {t.name: t.path for t in cfg.trees}["codex"] == decoded.trees[0].path


def test_a_config_key_without_a_description_stops_the_config_generator():
    class Bare(msgspec.Struct, kw_only=True):
        said: Annotated[int, msgspec.Meta(description="a key", examples=[1])] = 1
        bare: str | None = None

    with pytest.raises(CONFIG_GEN.KeyUndocumented, match="'bare'"):
        CONFIG_GEN.key_table(Bare)


def test_the_generator_finds_commands_it_does_not_name():
    """A command another module registers (as `journal input ...` or `journal ls` will)
    is found by walking the group: a group, its subcommand and the subcommand's option."""
    group = click.Group("journal", context_settings={"help_option_names": ["-h", "--help"]})
    inputs = click.Group("input", help="Manage inputs.")
    inputs.add_command(click.Command("add", help="Add an input.", params=[click.Option(["--name"], help="Its name.")]))
    group.add_command(inputs)
    ctx = click.Context(group, info_name="journal")

    found = [(path, [p.name for p in cmd.params]) for path, cmd, _ in GEN.walk(group, ctx)]

    assert found == [("input", []), ("input add", ["name"])]
    assert GEN.long_options(inputs.commands["add"]) == ["--name"]


@pytest.mark.parametrize(("words", "cword", "expected"), [
    ("journal chec", 1, "plain,checkpoint"),
    ("journal gc --keep-l", 2, "plain,--keep-last"),
    ("journal restore --dry", 2, "plain,--dry-run"),
], ids=["command", "gc option", "restore option"])
def test_shell_completion_comes_from_click(run_journal, tmp_path, words, cword, expected):
    proc = run_journal(env={"_JOURNAL_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword),
                            "HOME": str(tmp_path)})

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [expected]


def test_the_bash_completion_script_is_the_documented_one(run_journal, tmp_path):
    proc = run_journal(env={"_JOURNAL_COMPLETE": "bash_source", "HOME": str(tmp_path)})

    assert proc.returncode == 0 and "_journal_completion" in proc.stdout and "complete " in proc.stdout
    assert 'eval "$(_JOURNAL_COMPLETE=bash_source journal)"' in CLI_MD.read_text()


def flat(text: str) -> str:
    """Text with every run of whitespace (line breaks included) as one space."""
    return re.sub(r"\s+", " ", text)


def bench_section(heading: str, until: str, doc: Path = BENCHMARKS) -> str:
    """``doc`` from ``heading`` to ``until`` (or to its end), flattened."""
    text = doc.read_text()
    start = text.index(heading)
    end = text.find(until, start + len(heading))
    return flat(text[start:end if end >= 0 else len(text)])


def current() -> str:
    return bench_section("## Current results", "\n## ")


def tree_20k() -> str:
    section = current()
    return section[section.index("| 20,000-file tree |"):]


def ninth() -> str:
    return bench_section("### Ninth run", "\n### Eighth run", BENCHMARKS_LOG)


def link() -> str:
    """The current run's link part: its table, then what the section says of it."""
    section = current()
    return section[section.index("| over a 20 MB/s link"):]


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
    ("20,000 files from the CLI", r"two processes: (\S+ ms) from the CLI", tree_20k,
     r"\| idle tick \| journal \| 0 B \| 0 \| (\S+ ms) \|"),
    ("20,000 files in supervise", r"from the CLI and (\S+ ms) in `journal supervise`", current,
     r"journal's 20,000-file idle tick in-process: (\S+ ms)"),
    ("20,000 files, legacy", r"against (\S+ ms) for the legacy tick\. Any difference", tree_20k,
     r"\| idle tick \| legacy \| 0 B \| 0 \| (\S+ ms) \|"),
    ("active tick", r"that is (\S+ KiB) a tick", current, r"\| active tick \(mean\) \| journal \| (\S+ KiB) \|"),
    ("active tick CPU in supervise", r"Its CPU is (\S+ ms) a tick inside `journal supervise`", current,
     r"\| active tick \(mean\) \| journal-supervise \| \S+ KiB \| [^|]* \| \S+ ms \| (\S+ ms) \|"),
    ("active tick CPU ratio", r"`journal supervise` \((\S+x) the\s+legacy tick's", current,
     r"as `journal supervise` runs it \(in-process\): CPU <= legacy: journal \S+ ms vs legacy \S+ ms = (\S+x)"),
    ("legacy active tick CPU", r"legacy tick's (\S+ ms)\) and", current,
     r"\| active tick \(mean\) \| legacy \| \S+ MiB \| [^|]* \| \S+ ms \| (\S+ ms) \|"),
    ("active tick CPU from the CLI", r"and (\S+ ms) as a `journal checkpoint` command", current,
     r"\| active tick \(mean\) \| journal \| \S+ KiB \| [^|]* \| \S+ ms \| (\S+ ms) \|"),
    ("one change of 20,000 in supervise", r"one changed file of the 20,000 takes (\S+ ms)", tree_20k,
     r"\| one-change tick \| journal-supervise \| [^|]* \| \d+ \| (\S+ ms) \|"),
    ("one change of 20,000 from the CLI", r"`journal supervise` and (\S+ ms) from the CLI \(which", tree_20k,
     r"\| one-change tick \| journal \| [^|]* \| \d+ \| (\S+ ms) \|"),
    ("one change of 20,000, CPU", r"add up to (\S+ ms) and (\S+ ms), against the legacy tick's (\S+ ms)", tree_20k,
     r"\| one-change tick \| journal \| [^|]* \| \d+ \| \S+ ms \| (\S+ ms) \|.*"
     r"\| one-change tick \| journal-supervise \| [^|]* \| \d+ \| \S+ ms \| (\S+ ms) \|.*"
     r"\| one-change tick \| legacy \| [^|]* \| \d+ \| \S+ ms \| (\S+ ms) \|"),
    ("one change of 20,000, legacy", r"against (\S+ ms) for the legacy tick; in CPU", tree_20k,
     r"\| one-change tick \| legacy \| [^|]* \| \d+ \| (\S+ ms) \|"),
    ("legacy active tick", r"against (\S+ MiB) for the legacy rsync design", current,
     r"\| active tick \(mean\) \| legacy \| (\S+ MiB) \|"),
    ("restic active tick", r"and (\S+ KiB) for restic", current, r"\| active tick \(mean\) \| restic \| (\S+ KiB) \|"),
    (".claude.json rewrite (ninth run)", r"makes a tick of (~\S+ KiB), manifest and index included, instead of "
     r"(~\S+ KiB)", ninth, r"a 560 KB `.claude.json` with one value changed: (~\S+ KiB) -> (~\S+ KiB)"),
    ("2 GiB checkpoint", r"a 2,048 MiB file takes (\S+ MiB) to checkpoint", current,
     r"\| journal checkpoint \| \S+ s \| \S+ s \| \S+ s \| (\S+ MiB) \|"),
    ("2 GiB restore", r"and (\S+ MiB) to restore", current, r"\| journal restore \| \S+ s \| \S+ s \| \S+ s \| (\S+ MiB) \|"),
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
    ("tick over a link", r"an active tick is durable in (\S+ ms), (\S+x) the legacy design's time and (\S+x) restic's",
     link, r"\| active tick \(mean\) \| journal \| \S+ KiB \| 3 \| (\S+ ms) \|.*"
     r"An active tick is durable in (\S+x) the legacy design's time and (\S+x) restic's"),
    ("restore over a link", r"a full restore takes (\S+ s), (\S+x) `rsync -a`'s and (\S+x) restic's", link,
     r"\| full restore \| journal \| \| \| (\S+ s) \|.*a full restore takes (\S+x) `rsync -a`'s and (\S+x) restic's"),
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
