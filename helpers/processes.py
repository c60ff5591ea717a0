"""Process groups: who is in one, whether it is alive, and stopping all of it (a server and its EngineCore, a
benchmark client). Linux-first: ``PR_SET_PDEATHSIG`` and process groups; psutil lists the members."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

import psutil


class ServerError(RuntimeError):
    """A server that did not start, did not become healthy, or did not stop (its process group survived SIGKILL).
    ``helpers.serving`` raises it and re-exports it."""


STOP_TIMEOUT_S = 30.0  # SIGTERM, then this long for a clean shutdown, then SIGKILL


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the system's pick), for a server a test or the e2e run starts."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, status) of every process in process group ``pgid`` (psutil's status names, e.g. 'running', 'zombie')."""
    members = []
    for process in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(process.info["pid"]) == pgid:
                members.append((process.info["pid"], process.info["status"]))
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a running member: a zombie whose parent died waits for PID 1 to
    reap it (some container inits never do) and holds no memory, so it does not count."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(status not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) for _, status in group_members(pgid))


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def stop_group(process: subprocess.Popen, pgid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to the group, up to ``timeout_s`` for it to go, then SIGKILL; reaps the leader. Idempotent."""
    if process.poll() is None or group_alive(pgid):
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            process.poll()  # reaps the leader once it exits
            if not group_alive(pgid):
                break
            time.sleep(0.05)
        else:
            _signal_group(pgid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + 10
    while group_alive(pgid) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)
        time.sleep(0.05)
    if group_alive(pgid):
        raise ServerError(f"process group {pgid} survived SIGKILL: {group_members(pgid)}")


# Runs first in the new process, then execs the real command (same pid): the kernel sends SIGTERM to it when
# the thread that started it dies, so a hard-killed notebook kernel does not leave a server behind.
_PARENT_DEATH = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('parent died before the server started')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _with_parent_death(argv: Sequence[str]) -> list[str]:
    if not sys.platform.startswith("linux"):
        return list(argv)
    executable = argv[0] if os.path.isabs(argv[0]) else _which(argv[0])
    return [sys.executable, "-c", _PARENT_DEATH, str(os.getpid()), executable, *argv[1:]]


def _which(program: str) -> str:
    import shutil

    found = shutil.which(program)
    if found is None:
        raise FileNotFoundError(f"{program!r} is not on PATH")
    return found
