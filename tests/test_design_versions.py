"""docs/design.md states the versions the code writes, and states them right.

Its §3 "Versions" table names each version constant (a dotted path into ``journal``) and
its value, and every constant the doc cites as ``NAME`` (N) elsewhere must say the same
value. A constant that changes without the doc fails here, so does a version constant
the table does not list, and so does a doc that drifts from the table.
"""

from __future__ import annotations

import functools
import importlib
import re
import typing
from pathlib import Path

import msgspec
import pytest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
#: A module-level name the code keeps a version or a format number in.
VERSION_NAME = re.compile(r"(?:^|_)VERSIONS?$|^FORMAT$")
#: How the doc cites one: `NAME` (N), NAME a table constant or the end of one's path.
CITED = re.compile(r"`([A-Za-z_][\w.]*)` \((\d+)\)")
#: A module-level assignment (at the start of a line: not in a class or function).
ASSIGNED = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", re.MULTILINE)


def resolve(dotted: str):
    """The value ``journal.module.NAME`` (or ``journal.module.Struct.field``, a msgspec
    field's default or its one ``Literal`` value) has in the code now."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        rest = parts[cut:]
        break
    else:
        raise LookupError(f"no module in {dotted}")
    for name in rest[:-1]:
        obj = getattr(obj, name)
    if isinstance(obj, type) and issubclass(obj, msgspec.Struct):
        field = next(f for f in msgspec.structs.fields(obj) if f.name == rest[-1])
        if field.default is not msgspec.NODEFAULT:
            return field.default
        (only,) = typing.get_args(field.type)
        return only
    return getattr(obj, rest[-1])


def said(value) -> str:
    """A value as the table writes it: ``4``, or ``1, 2, 3, 4`` for a tuple."""
    return ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def versions_table(text: str) -> dict[str, str]:
    """The §3 "Versions" table: each constant's dotted path -> the value the doc gives."""
    section = text[text.index("## 3. Store layout"):text.index("## 4.")]
    if "**Versions.**" not in section:
        return {}
    table = section[section.index("**Versions.**"):]
    table = table[:table.index("\n\n", table.index("\n|"))]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or set(cells[2]) <= {"-"}:
            continue
        for name in re.findall(r"`(journal\.[\w.]+)`", cells[1]):
            rows[name] = cells[2]
    return rows


@functools.cache
def code_version_constants() -> frozenset[str]:
    """Every module-level version or format constant in ``journal/``, as a dotted path."""
    found = set()
    for path in sorted((ROOT / "journal").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for name in ASSIGNED.findall(path.read_text()):
            if VERSION_NAME.search(name):
                found.add(f"{module}.{name}")
    return frozenset(found)


def version_problems(text: str) -> list[str]:
    """What the doc says wrong about the versions, one line each (none: it agrees)."""
    table = versions_table(text)
    problems = [f"§3's Versions table does not list {name}" for name in sorted(code_version_constants() - set(table))]
    for name, value in table.items():
        actual = said(resolve(name))
        if value != actual:
            problems.append(f"§3's Versions table says {name} is {value}; the code says {actual}")
    for match in CITED.finditer(text):
        name, value = match.groups()
        owners = [full for full in table if full == name or full.endswith("." + name)]
        if len(owners) > 1:
            problems.append(f"`{name}` ({value}) is ambiguous: say which of {', '.join(owners)}")
        elif owners and table[owners[0]] != value:
            problems.append(f"the doc cites `{name}` ({value}); §3's table says {table[owners[0]]}")
    written = re.findall(r"This code writes format (\d+)", text)
    model_format = "journal.format.model.FORMAT"
    if written != [table.get(model_format)]:
        problems.append(f"§18 says this code writes format {written}; §3's table says {table.get(model_format)}")
    return problems


def test_the_design_states_every_version_the_code_writes():
    assert version_problems(DESIGN.read_text()) == []


def test_every_version_constant_is_found():
    """The scan finds the constants it must (a scan that found none would pass anything)."""
    assert {"journal.format.model.FORMAT", "journal.format.model.STORE_VERSION",
            "journal.local.state.STATE_VERSION", "journal.local.quiet.FORMAT"} <= code_version_constants()


def test_a_changed_constant_fails(monkeypatch):
    import journal.format.model as model

    monkeypatch.setattr(model, "STORE_VERSION", model.STORE_VERSION + 1)

    problems = version_problems(DESIGN.read_text())

    assert any("journal.format.model.STORE_VERSION" in p for p in problems), problems


@pytest.mark.parametrize(("old", "new", "named"), [
    ("| `journal.local.state.STATE_VERSION` | 4 |", "| `journal.local.state.STATE_VERSION` | 3 |", "STATE_VERSION"),
    ("`STORE_VERSION` (2)", "`STORE_VERSION` (1)", "STORE_VERSION"),
    ("This code writes format ", "This code writes format 1", "format"),
], ids=["table", "cited", "format"])
def test_a_drifted_doc_fails(old, new, named):
    text = DESIGN.read_text()
    assert old in text

    problems = version_problems(text.replace(old, new, 1))

    assert any(named in p for p in problems), problems
