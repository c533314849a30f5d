"""What CMD finds in its environment under ``journal supervise`` (design §15): never
the variables that open an encrypted store, unless ``--pass-key-env`` asks for them."""

from __future__ import annotations

import pytest

from conftest import Live

KEYS = ("JOURNAL_PASSPHRASE", "JOURNAL_KEY_FILE", "JOURNAL_NEW_PASSPHRASE")


def cmd_env(live: Live, tmp_path, *options: str) -> dict[str, str]:
    """The environment CMD saw: ``supervise [options] -- sh -c 'env -0 > FILE'``."""
    seen = tmp_path / "env"
    live.run("supervise", *options, "--", "sh", "-c", f"env -0 > '{seen}'", expect=0)
    return dict(item.split("=", 1) for item in seen.read_text().split("\0") if item)


@pytest.fixture(params=["passphrase", "key file"])
def encrypted(request, tmp_path) -> Live:
    """A container on an encrypted store opened by a passphrase or by a key file, with
    a new passphrase set as for `journal key rotate`."""
    key = ({"JOURNAL_PASSPHRASE": "open sesame"} if request.param == "passphrase"
           else {"JOURNAL_KEY_FILE": str(tmp_path / "store.key")})
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True, env={**key, "JOURNAL_NEW_PASSPHRASE": "next"})
    live.run("init", "--encrypt", expect=0)
    return live


def test_cmd_runs_without_the_variables_that_open_the_store(encrypted, tmp_path):
    env = cmd_env(encrypted, tmp_path)
    assert not set(KEYS) & set(env), env
    assert env["AM_LOCAL"] == encrypted.env["AM_LOCAL"]   # everything else is passed on
    assert encrypted.log()[0]["seq"] >= 1                  # supervise itself still opens the store


def test_pass_key_env_gives_cmd_the_variables_that_open_the_store(encrypted, tmp_path):
    env = cmd_env(encrypted, tmp_path, "--pass-key-env")
    assert {k: env.get(k) for k in KEYS} == {k: encrypted.env.get(k) for k in KEYS}
