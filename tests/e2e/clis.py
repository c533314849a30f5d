"""The real agent CLIs, installed from the npm registry and PyPI into a cache directory.

``python -m tests.e2e.clis`` installs every CLI (once; a second run finds them) and
prints one line per CLI: its version, or why it could not be installed. The tests ask
``installed(name)``, which skips a test with that reason rather than pass it.

The versions are pinned: each was run with the e2e suite and its files decided in
``docs/harnesses.md``; ``JOURNAL_E2E_LATEST=1`` installs the newest releases instead
(to see what changed before moving a pin). ``JOURNAL_E2E_CACHE`` says where they go
(default ``~/.cache/journal-e2e``).
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

NPM: dict[str, tuple[str, str, str]] = {            # name: (package, pinned version, binary)
    "codex": ("@openai/codex", "0.171.0", "codex"),
    "claude": ("@anthropic-ai/claude-code", "2.1.197", "claude"),
    "opencode": ("opencode-ai", "1.18.33", "opencode"),
    "gemini": ("@google/gemini-cli", "0.61.0", "gemini"),
    "openclaw": ("openclaw", "2026.9.6", "openclaw"),
}
#: CLIs that need a newer Node than a distribution ships: the version (pinned) of the
#: npm registry's ``node-linux-<arch>`` package, which holds the ``node`` binary.
NODE: dict[str, str] = {
    "openclaw": "24.22.3",          # its engines: node >=24.16.0 <25 || >=26.1.0
}
PYPI: dict[str, tuple[str, str, str]] = {
    "hermes": ("hermes-agent", "0.19.0", "hermes"),
}
#: Harnesses no registry here offers, and why (``installed`` skips with it).
UNAVAILABLE: dict[str, str] = {
    "fx": "no registry ships the fx agent harness: npm's fx (39.2.0) is a JSON viewer (`npm view fx "
          "description`: 'Command-line JSON viewer') and PyPI's fx (0.3) a 2014 functional-programming library",
}
NAMES = (*NPM, *PYPI, *UNAVAILABLE)


def cache_dir() -> Path:
    return Path(os.environ.get("JOURNAL_E2E_CACHE") or Path.home() / ".cache" / "journal-e2e")


@dataclass(frozen=True)
class Installed:
    name: str
    binary: Path
    version: str                # as the CLI prints it with --version
    package: str
    path: tuple[str, ...] = ()  # directories to put first on PATH to run it (its own Node)

    @property
    def bin_dir(self) -> str:
        return str(self.binary.parent)


class Unavailable(Exception):
    """A CLI that cannot be installed or run here; the message says why."""


def _spec(package: str, pin: str) -> str:
    return package if os.environ.get("JOURNAL_E2E_LATEST") else f"{package}@{pin}"


def _run(cmd: list[str], timeout: float = 900, path: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false",
           "npm_config_audit": "false", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PATH": os.pathsep.join([*path, os.environ.get("PATH", os.defpath)])}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def _tail(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in (done.stderr or done.stdout or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit {done.returncode}"


def _install_node(version: str, root: Path) -> str:
    """The directory of a ``node`` of ``version``, from the npm registry's ``node-linux-<arch>``."""
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine())
    if arch is None or not sys.platform.startswith("linux"):
        raise Unavailable(f"no node-linux package on npm for {sys.platform} {platform.machine()}")
    package = f"node-linux-{arch}@{version}"
    prefix = root / "npm" / f"node-{version}"
    bin_dir = prefix / "node_modules" / f"node-linux-{arch}" / "bin"
    if not (bin_dir / "node").exists():
        prefix.mkdir(parents=True, exist_ok=True)
        done = _run(["npm", "install", "--prefix", str(prefix), "--no-save", package])
        if done.returncode != 0 or not (bin_dir / "node").exists():
            raise Unavailable(f"npm install {package} failed: {_tail(done)}")
    return str(bin_dir)


def _install_npm(name: str, root: Path) -> tuple[Path, tuple[str, ...]]:
    """The CLI's binary, and the directories its PATH needs first (its own Node)."""
    package, pin, binary = NPM[name]
    if shutil.which("npm") is None:
        raise Unavailable("npm is not installed (apt-get install npm)")
    extra = (_install_node(NODE[name], root),) if name in NODE else ()
    prefix = root / "npm" / name
    path = prefix / "node_modules" / ".bin" / binary
    if not path.exists() or os.environ.get("JOURNAL_E2E_LATEST"):
        prefix.mkdir(parents=True, exist_ok=True)
        done = _run(["npm", "install", "--prefix", str(prefix), "--no-save", _spec(package, pin)], path=extra)
        if done.returncode != 0 or not path.exists():
            raise Unavailable(f"npm install {_spec(package, pin)} failed: {_tail(done)}")
    return path, extra


def _install_pypi(name: str, root: Path) -> tuple[Path, tuple[str, ...]]:
    package, pin, binary = PYPI[name]
    venv = root / "pypi" / name
    path = venv / "bin" / binary
    if not path.exists() or os.environ.get("JOURNAL_E2E_LATEST"):
        done = _run([sys.executable, "-m", "venv", str(venv)])
        if done.returncode == 0:
            done = _run([str(venv / "bin" / "pip"), "install", "-q", _spec(package, pin).replace("@", "==")])
        if done.returncode != 0 or not path.exists():
            raise Unavailable(f"pip install {_spec(package, pin)} failed: {_tail(done)}")
    return path, ()


def _version(path: Path, extra: tuple[str, ...]) -> str:
    try:
        done = _run([str(path), "--version"], timeout=120, path=extra)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{path} --version did not answer in 120 s") from None
    if done.returncode != 0:
        raise Unavailable(f"{path} --version failed: {_tail(done)}")
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[0]


def install(name: str) -> Installed:
    """``name`` installed (under a lock: test workers share the cache), or Unavailable."""
    if name in UNAVAILABLE:
        raise Unavailable(UNAVAILABLE[name])
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    record = root / f"{name}.json"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists() and not os.environ.get("JOURNAL_E2E_LATEST"):
            known = json.loads(record.read_text())
            if Path(known["binary"]).exists():
                return Installed(name, Path(known["binary"]), known["version"], known["package"],
                                 tuple(known.get("path", ())))
        package = (NPM.get(name) or PYPI[name])[0]
        try:
            path, extra = _install_npm(name, root) if name in NPM else _install_pypi(name, root)
            found = Installed(name, path, _version(path, extra), package, extra)
        except (Unavailable, subprocess.TimeoutExpired, OSError) as err:
            raise Unavailable(str(err)) from None
        record.write_text(json.dumps({"binary": str(path), "version": found.version, "package": package,
                                      "path": list(extra)}))
        return found


def installed(name: str):
    """For a test: the installed CLI, or a pytest skip naming why it is not."""
    import pytest
    try:
        return install(name)
    except Unavailable as err:
        pytest.skip(f"{name} cannot be installed here: {err}")


def main(argv: list[str]) -> int:
    names = argv[1:] or list(NAMES)
    for name in names:
        try:
            cli = install(name)
            print(f"e2e: {name:9} {cli.package} {cli.version}", flush=True)
        except Unavailable as err:
            print(f"e2e: {name:9} SKIPPED: {err}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
