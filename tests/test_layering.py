"""journal's modules form layers: no import cycle, and no import upward or sideways.

The order is declared once, here (``LAYERS``), and stated in docs/design.md ("Code
layout"); each subpackage's ``__init__`` docstring says what it may import ("May
import: ..."): every unit it does import, within what the layers allow
(``test_each_package_says_what_it_may_import``). Every import counts, at
module level or inside a function (those are how the idle fast path stays cheap,
and they load the module all the same), ``TYPE_CHECKING`` ones included.

A new subpackage or top-level module fails ``test_every_module_has_a_layer`` until it
is given a place in ``LAYERS`` (or, for a small shared module, in ``BASE``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "journal"

#: The top-level modules every layer may use; they import only each other.
BASE = frozenset({"journal", "errors", "os_errors", "paths", "signatures", "report", "localfs", "atomic",
                  "presets", "heap", "background"})
#: Lowest first. A module may import its own unit (its subpackage; the base modules
#: count as one unit) and any unit of a lower layer; the units of one layer are
#: independent of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),
    ("store", "format"),
    ("local", "config"),
    ("crypto",),
    ("repository",),
    ("sqlite",),
    ("checkpoint", "gc", "browse", "inputs"),
    ("restore", "copy"),   # a restore over a diverged disk first checkpoints its local work as a fork
    ("verify",),
    ("migrate", "supervise"),
    ("cli",),
)
#: Top-level modules that belong to a unit of another name.
ALIASES = {"__main__": "cli", "verify_shared": "verify"}

LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def module_files() -> dict[str, Path]:
    """Every module of journal, by dotted name."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = module_files()


def unit_of(module: str) -> str:
    """The unit a module belongs to: its subpackage, or "base", or its own name."""
    parts = module.split(".")
    if len(parts) == 1:
        return "base"
    name = parts[1]
    if f"journal.{name}" in MODULES and (PACKAGE / name).is_dir():
        return name
    return "base" if name in BASE else ALIASES.get(name, name)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str) -> str | None:
    """The module ``name`` is, or lies in (an attribute of it), if it is journal's."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """The journal modules ``module`` imports anywhere in its source."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, path.name == "__init__.py", node)
            names = [f"{source}.{alias.name}" for alias in node.names] or [source]
        else:
            continue
        for name in names:
            if name == "journal" or name.startswith("journal."):
                target = _known(name)
                if target is not None and target != module:
                    found.add(target)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a unit that is not below the importer's, nor its own."""
    out = []
    for module, targets in sorted(graph.items()):
        mine = unit_of(module)
        for target in sorted(targets):
            theirs = unit_of(target)
            if theirs == mine or LEVEL[theirs] < LEVEL[mine]:
                continue
            how = "upward" if LEVEL[theirs] > LEVEL[mine] else "sideways"
            out.append(f"{module} ({mine}) imports {target} ({theirs}): {how}")
    return out


def test_every_module_has_a_layer():
    missing = sorted({unit_of(m) for m in MODULES} - set(LEVEL))
    assert missing == [], f"give these a place in LAYERS (and in docs/design.md's Code layout): {missing}"


def test_no_import_cycle():
    assert find_cycle(GRAPH) is None, " -> ".join(find_cycle(GRAPH))


def test_no_import_goes_up_or_sideways():
    assert violations(GRAPH) == []


def test_the_checks_catch_a_cycle_and_an_upward_import():
    """The checks above, on a made-up graph: they would fail on what they must."""
    graph = {"journal.local.quiet": {"journal.cli.app"}, "journal.cli.app": {"journal.local.quiet"},
             "journal.checkpoint.run": {"journal.gc.run"}, "journal.gc.run": set()}
    assert find_cycle(graph) == ["journal.cli.app", "journal.local.quiet", "journal.cli.app"]
    assert violations(graph) == [
        "journal.checkpoint.run (checkpoint) imports journal.gc.run (gc): sideways",
        "journal.local.quiet (local) imports journal.cli.app (cli): upward",
    ]


def test_function_level_imports_count():
    """``cli/launch.py`` imports the full command line inside a function: that edge is seen."""
    assert "journal.cli.entry" in GRAPH["journal.cli.launch"]


_MAY_IMPORT = re.compile(r"May import:(.*?)(?:\.\s*$|\.\s+[A-Z]|;)", re.S | re.M)


def _allowed_below(unit: str) -> set[str]:
    return {u for u in LEVEL if LEVEL[u] < LEVEL[unit]}


def _said(doc: str) -> set[str]:
    """The units a "May import:" sentence names."""
    match = _MAY_IMPORT.search(doc)
    assert match, "no 'May import:' sentence"
    text = " ".join(match.group(1).split())
    if "every package and module of journal" in text:
        return set(LEVEL)
    said = {unit_of(f"journal.{name}") for name in re.findall(r"``journal\.(\w+)", text)}
    if "the base modules" in text:
        said.add("base")
    return said


@pytest.mark.parametrize("unit", sorted(u for u in LEVEL if (PACKAGE / u / "__init__.py").is_file()))
def test_each_package_says_what_it_may_import(unit):
    """Its "May import:" sentence names every unit the package imports, and only units
    the layers allow it."""
    doc = ast.get_docstring(ast.parse((PACKAGE / unit / "__init__.py").read_text(encoding="utf-8"))) or ""
    said = _said(doc) - {unit}
    used = {unit_of(t) for m, targets in GRAPH.items() if unit_of(m) == unit for t in targets} - {unit}
    assert used <= said <= _allowed_below(unit), (
        f"journal/{unit}/__init__.py: its 'May import:' names {sorted(said)}; the package imports "
        f"{sorted(used)}; the layers allow {sorted(_allowed_below(unit))}")
