"""fx under journal: skipped, with the reason, while no registry ships the fx agent
harness (``tests/e2e/clis.py``, ``UNAVAILABLE``); never passed without running it."""

from __future__ import annotations

import pytest

from tests.e2e.clis import installed


def test_fx_resumes_after_a_lost_container():
    cli = installed("fx")
    pytest.fail(f"{cli.package} {cli.version} installs now: give it an Agent as tests/e2e/test_codex.py does")
