"""The project stands alone: no code, test or tool names a path of one machine.

The suite must pass on any fresh clone (the README's ``make test``), so nothing may
read the workplace's own folders (the fixtures now live in ``tests/fixtures/``) or
any other absolute path of the machine the code was written on.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Built from pieces so this file does not match its own patterns.
_W, _R, _S = "wo" + "rk", "ro" + "ot", "sha" + "red"
MACHINE_PATH = re.compile(
    rf"(?<![\w.~}})-])/(?:{_W}|{_R})(?:/|\b)"   # an absolute path under either
    rf"|\.\./{_S}\b"                              # the workplace folder beside the repo
    rf"|(?<![\w-]){_S}/(?:fixtures|seed|hooks|PLATFORM|STYLE)"
)
SCANNED = ("journal", "tests", "tools", "bin", ".ci", "Makefile", "pyproject.toml", "README.md", "docs")


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *SCANNED], cwd=ROOT, capture_output=True, check=True)
    files = []
    for name in out.stdout.decode().split("\0"):
        if not name or name.startswith("tests/fixtures/") or name.startswith("tests/golden/"):
            continue
        path = ROOT / name
        if path.is_file():
            files.append(path)
    return files


def test_no_file_names_a_path_of_this_machine():
    offenders = []
    for path in tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert offenders == [], "machine paths found:\n" + "\n".join(offenders)


def test_the_pattern_catches_what_it_must():
    for bad in (f"/{_W}/{_S}/fixtures/real", f"Path('/{_R}/.cache')", f"../{_S}/seed/x.md", f"{_S}/fixtures/real"):
        assert MACHINE_PATH.search(bad), bad
    for good in ("/home/node/work/repo", "/data/journal", "tests/fixtures/real", "network", "~/work/x"):
        assert not MACHINE_PATH.search(good), good


def test_fixtures_are_in_the_repository_with_their_notices():
    real = ROOT / "tests" / "fixtures" / "real"
    assert (real / "SOURCES.md").is_file() and (real / "LICENSES.md").is_file()
    notices = (real / "LICENSES.md").read_text()
    for repo in ("madshn/localpush", "marot/spotter", "badlogic/pi-mono"):
        assert repo in notices
    assert notices.count("Permission is hereby granted, free of charge") == 3
    assert len(list(real.rglob("*.jsonl"))) >= 11


def test_the_package_metadata_uses_the_current_license_form():
    """setuptools warns on every install about a ``project.license`` table: the metadata
    says the license as an SPDX string with ``license-files``, which needs setuptools 77."""
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert all((ROOT / name).is_file() for name in project["license-files"])
    (requirement,) = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert re.fullmatch(r"setuptools>=(\d+)", requirement) and int(requirement.split(">=")[1]) >= 77


def test_the_editable_install_is_a_plain_path_without_a_transitional_mode():
    """setuptools warns on every `make` about the `compat` editable mode, which it will
    remove. The root package directory mapped to the project root makes its default
    (lenient) mode write a plain `.pth` of the project root, as `compat` did: no import
    hook on every start, and no warning."""
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    make = (ROOT / "Makefile").read_text()
    installs = [line for line in make.splitlines() if "pip install" in line and "-e " in line]

    assert meta["tool"]["setuptools"]["package-dir"] == {"": "."}
    assert installs and not any("editable_mode" in line for line in installs), installs


def test_the_readme_says_how_long_make_test_takes_idle_and_under_load():
    text = " ".join((ROOT / "README.md").read_text().split())
    (said,) = re.findall(r"`make test` runs the suite in three pytest-xdist workers[^.]*\([^)]*\)", text)

    assert re.search(r"about \d+ s on 2 idle cores", said) and re.search(r"about \d+ s under load", said), said
