"""Running the real ``journal`` CLI in a subprocess, with a clean environment."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

#: ``python -m journal``: the CLI from the package, as most tests run it.
JOURNAL = [sys.executable, "-m", "journal"]


def journal_script() -> list[str]:
    """The installed ``journal`` script (``bin/journal``: the launcher's fast exit), or
    ``python -m journal`` where it is not installed next to this interpreter."""
    script = os.path.join(os.path.dirname(sys.executable), "journal")
    return [script] if os.path.exists(script) else list(JOURNAL)


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment (``PATH``, ``LANG``) plus ``env``: nothing of the caller's
    journal variables, HOME or config reaches the child."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **(env or {})}


def run_journal(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
                unprivileged: bool = False, memory: int | None = None, cmd: list[str] | None = None,
                cwd=None, stdin: str | bytes | None = None, text: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m journal ARGS`` (or ``cmd ARGS``) in a clean environment plus
    ``env`` (in ``cwd``), ``stdin`` (bytes as they are, text as UTF-8) on its standard
    input if given; with ``unprivileged``, bound by file modes as an ordinary user is
    (``drop_dac_override``); ``memory`` caps its address space (``RLIMIT_AS``, bytes).
    Its output is text, or bytes as written unless ``text``; the result also carries
    the child's ``pid``."""
    def prepare() -> None:
        if unprivileged:
            drop_dac_override()
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    data = stdin.encode() if isinstance(stdin, str) else stdin
    with subprocess.Popen([*(cmd or JOURNAL), *args], env=clean_env(env), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=None if data is None else subprocess.PIPE, cwd=cwd,
                          preexec_fn=prepare if unprivileged or memory else None) as proc:
        try:
            out, err = proc.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    if text:
        out, err = _text(out), _text(err)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    done.pid = proc.pid
    return done


def _text(data: bytes) -> str:
    """Output as ``subprocess`` reads it in text mode: UTF-8, universal newlines."""
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")


#: Runs argv and prints its exit status and peak RSS (KiB). A process's peak RSS counts
#: the memory of the one it was forked from (Linux keeps the high-water mark across
#: exec), so the command is started by this fresh interpreter, not by pytest, whose
#: size grows with the tests run before.
_PEAK_RSS = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:], stdout=sys.stdout.buffer); "
             "print('', rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)")


def peak_rss(argv: list[str], env: dict[str, str], stdout: Path | None = None,
             stderr: Path | None = None) -> tuple[int, int]:
    """Run ``argv`` (with ``env`` over a clean environment) in a grandchild, its stdout
    into ``stdout`` (else discarded) and its stderr into ``stderr`` (else discarded);
    ``(exit status, its peak RSS in bytes)``."""
    with open(stdout or os.devnull, "wb") as out, open(stderr or os.devnull, "wb") as err:
        done = subprocess.run([sys.executable, "-c", _PEAK_RSS, *argv], env=clean_env(env), stdout=out,
                              stderr=subprocess.PIPE, check=True)
        lines = done.stderr.splitlines()
        err.write(b"\n".join(lines[:-1]).rstrip())
    rc, peak_kib = map(int, lines[-1].split())
    return rc, peak_kib * 1024


_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def drop_dac_override() -> None:
    """A ``preexec_fn``: the child runs without ``CAP_DAC_OVERRIDE`` and
    ``CAP_DAC_READ_SEARCH`` (dropped from its bounding set, so ``exec`` does not give
    them back to root), so a directory at mode 000 refuses it with ``EACCES`` as it
    refuses an unprivileged user. It stays uid 0, so it can still run this
    interpreter, which lives under root's 0700 home. A non-root child needs nothing."""
    if os.geteuid() != 0:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` for a child a test sends SIGINT: Ctrl-C's default disposition. A
    shell starts background jobs with SIGINT ignored and children inherit that, so in
    a suite run in the background the child would ignore it; at a terminal it gets it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def no_traceback(proc) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-3000:]


def one_line_error(proc) -> str:
    """The single ``journal: error: ...`` line of a failed command (asserts the shape:
    one line on stderr, no traceback anywhere)."""
    no_traceback(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one error line, got {len(lines)}:\n{proc.stderr}"
    assert lines[0].startswith("journal: error: "), lines[0]
    return lines[0]
