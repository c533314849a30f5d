"""Shared fixtures: a live agent-state tree on local disk, a local store, the CLI.

The harness itself is ``tests/helpers`` (re-exported here, so ``from conftest import
Live`` works in every module): ``Live`` is a container, ``run_journal`` the CLI,
``wait_for`` and ``FakeClock`` keep tests on events rather than on the clock.

A test marked ``long`` runs at full size only under ``--long`` (``make test-long``):
``@pytest.mark.long(short=S, full=F)`` gives the ``long_size`` fixture S in a plain
run (``make test``, CI) and F under ``--long``; a ``long`` mark without sizes skips
the test in a plain run.

``live`` copies the real transcripts of ``tests/fixtures/real`` (laid out as under
``$AM_LOCAL``) into ``tmp_path/a/local`` and pairs them with a store at
``tmp_path/store``. ``make_live`` builds more of them; every one made in a test
shares that test's store, as containers sharing one bucket do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from helpers.cli import (JOURNAL, clean_env, drop_dac_override, journal_script, no_traceback, one_line_error,
                         peak_rss, run_journal, sigint_as_at_a_terminal)
from helpers.container import (FIXTURES, HARNESS_DIRS, CodexLive, Live, OpencodeLive, container_env, copy_fixtures,
                               gemini_record, golden_cli)
from helpers.pagecache import disk_dir, resident_pages
from helpers.crafted import CRAFTED_MEMORY, CRAFTED_TIMEOUT, Audit, run_on_crafted
from helpers.trees import LEFT_TMP, describe, sha256_file
from helpers.waits import FakeClock, wait_for

__all__ = ["Audit", "CRAFTED_MEMORY", "CRAFTED_TIMEOUT", "CodexLive", "FIXTURES", "FakeClock", "HARNESS_DIRS",
           "JOURNAL", "LEFT_TMP", "Live", "OpencodeLive", "clean_env", "container_env", "copy_fixtures", "describe",
           "disk_dir", "drop_dac_override", "gemini_record", "golden_cli", "journal_script", "no_traceback", "one_line_error", "peak_rss",
           "resident_pages", "run_journal", "run_on_crafted", "sha256_file", "sigint_as_at_a_terminal", "wait_for"]


#: The real-CLI suite runs only under ``make e2e`` (it installs the CLIs first).
collect_ignore = [] if os.environ.get("JOURNAL_E2E") else ["e2e"]


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true",
                     help="run the tests marked long at full size, and those without a short form (make test-long)")


def pytest_configure(config):
    """Every test's ``tmp_path`` on tmpfs (``/dev/shm``) when there is one, unless
    ``--basetemp`` or ``$PYTEST_DEBUG_TEMPROOT`` says where: journal fsyncs every object
    and manifest it publishes, and on a shared disk the suite waited on those more than
    it computed. A test that needs another filesystem mounts it (``small_tmpfs``). The
    xdist workers take their base temp dir from this process's."""
    if config.option.basetemp is None and "PYTEST_DEBUG_TEMPROOT" not in os.environ \
            and os.access("/dev/shm", os.W_OK | os.X_OK):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = "/dev/shm"


def pytest_collection_modifyitems(config, items):
    if config.getoption("--long"):
        return
    skip = pytest.mark.skip(reason="long, with no short form: `make test-long` runs it")
    for item in items:
        mark = item.get_closest_marker("long")
        if mark is not None and "short" not in mark.kwargs:
            item.add_marker(skip)


@pytest.fixture
def long_size(request):
    """The size a test marked ``long(short=S, full=F)`` runs at: F under ``--long``, else S."""
    mark = request.node.get_closest_marker("long")
    assert mark is not None and {"short", "full"} <= set(mark.kwargs), "needs @pytest.mark.long(short=S, full=F)"
    return mark.kwargs["full" if request.config.getoption("--long") else "short"]


@pytest.fixture(name="run_journal")
def run_journal_fixture():
    """The CLI runner: ``run_journal(*args, env={...})``."""
    return run_journal


@pytest.fixture
def small_tmpfs(tmp_path):
    """``small_tmpfs(size, ro=False)``: a new tmpfs of ``size`` (e.g. "1m") mounted on a
    directory under ``tmp_path``, unmounted at the end; skips where mounting is refused."""
    mounted: list[Path] = []

    def mount(size: str, *, ro: bool = False) -> Path:
        point = tmp_path / f"tmpfs-{len(mounted)}"
        point.mkdir()
        opts = f"size={size}" + (",ro" if ro else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(point)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=True)


@contextlib.contextmanager
def scratch_dir(fallback: Path):
    """A new directory on tmpfs when possible (many small files, cheap fsync), removed
    at the end; else ``fallback``."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="journal-test-", dir="/dev/shm"))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    else:
        yield fallback


@pytest.fixture
def root(tmp_path):
    """A scratch directory; on tmpfs when possible (``scratch_dir``)."""
    with scratch_dir(tmp_path) as path:
        yield path


def live_maker(base: Path):
    """``make(name, fixtures=True)``: a container in ``base / name`` on the store ``base / "store"``."""
    def make(name: str = "a", *, fixtures: bool = True) -> Live:
        return Live(base / name, base / "store", fixtures=fixtures)
    return make


@pytest.fixture
def make_live(tmp_path):
    """``make_live(name, fixtures=True)``: another container on this test's store."""
    return live_maker(tmp_path)


@pytest.fixture
def live(make_live) -> Live:
    return make_live("a")


@pytest.fixture
def bare_live(make_live) -> Live:
    """A container whose ``$AM_LOCAL`` starts empty."""
    return make_live("a", fixtures=False)
