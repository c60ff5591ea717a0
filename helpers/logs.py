"""Where vLLM's output goes: a log file under ``build/logs/``, not the notebook, the widgets or the terminal.

Two kinds of output, two mechanisms:

- **Log records** (vLLM's ``logging``, INFO and above): ``configure()`` points vLLM at ``helpers/vllm_logging.json``
  through ``VLLM_LOGGING_CONFIG_PATH``, vLLM's own switch, which child processes inherit (the multiprocess EngineCore
  and servers alike). Every record goes to the log file (``SPECDEC_LOG_FILE``, default ``build/logs/vllm.log``);
  records at ERROR and above are also printed, so a failure is never hidden. Nothing is filtered by message: a
  warning the kit has never seen, on a CPU it has never met, goes to the file like any other.
- **Native lines and prints**: C++ code in vLLM and torch writes straight to file descriptors 1 and 2 (e.g.
  ``[W1204 ... utils.cpp:68] Warning: NUMA binding ...``), and some of vLLM's modules ``print()`` (e.g. "Triton is
  installed, but doesn't include CPU backend"); Python's logging sees neither. ``native_to_log()`` points both
  descriptors, and ``sys.stdout``/``sys.stderr`` (a notebook's streams are not the descriptors), at the log file
  while an engine is built (vLLM imported by it) or runs; processes started inside it (the multiprocess
  EngineCore) inherit the file for good. ERROR records are printed on the console outside it (``ErrorsToConsole``).

``SPECDEC_VLLM_LOGS=1`` (set before starting Jupyter or ``make``) leaves all of this as vLLM has it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import logging.config
import os
import sys
import warnings
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

VLLM_LOGS = os.environ.get("SPECDEC_VLLM_LOGS", "0") not in ("", "0")
ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path(__file__).with_name("vllm_logging.json")
LOG_FILE_ENV = "SPECDEC_LOG_FILE"


def log_file() -> Path:
    """The file vLLM's records and native lines go to (``SPECDEC_LOG_FILE``, else ``build/logs/vllm.log``)."""
    return Path(os.environ.get(LOG_FILE_ENV) or ROOT / "build" / "logs" / "vllm.log")


class LogFileHandler(logging.FileHandler):
    """Appends to ``log_file()``, read when the handler is made (in each process, from its environment)."""

    def __init__(self) -> None:
        path = log_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(path, mode="a", encoding="utf-8", delay=True)


_outer_stdout: list = []  # the console outside native_to_log(): where ERROR records are printed


class ErrorsToConsole(logging.StreamHandler):
    """Prints a record on the console as it is when the record is written: the notebook's output or the terminal,
    never the log file that ``native_to_log()`` puts in the console's place while an engine is built or runs."""

    @property
    def stream(self):
        return _outer_stdout[-1] if _outer_stdout else sys.stdout

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler sets it once; the console is looked up at each use instead
        pass


def configure() -> None:
    """Send vLLM's records to the log file, in this process and in the processes it starts. Idempotent."""
    if VLLM_LOGS:
        return
    os.environ.setdefault(LOG_FILE_ENV, str(log_file()))
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(CONFIG)
    os.environ["VLLM_CONFIGURE_LOGGING"] = "1"
    if not _configured():  # now, not at vLLM's first engine: its modules log (to stderr) while they are imported
        logging.config.dictConfig(json.loads(CONFIG.read_text()))
    warnings.filterwarnings("ignore", message=r".*torch\.distributed\.reduce_op.*is deprecated", category=FutureWarning)


def _configured() -> bool:
    return any(isinstance(h, LogFileHandler) for h in logging.getLogger("vllm").handlers)


_LIBC = ctypes.CDLL(None)


@contextmanager
def native_to_log():
    """File descriptors 1 and 2 point at the log file inside the block (no-op with ``SPECDEC_VLLM_LOGS=1``); an
    exception raised inside it leaves with the log's path and error lines attached (``add_log_note``)."""
    if VLLM_LOGS:
        yield
        return
    path = log_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass
    saved = [os.dup(1), os.dup(2)]
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    stream = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (closed below)
    _outer_stdout.append(sys.stdout)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        with redirect_stdout(stream), redirect_stderr(stream):
            yield
    except Exception as error:  # raised by vLLM inside the block (a failed build, an engine process that died)
        add_log_note(error)
        raise
    finally:
        _LIBC.fflush(None)  # C stdio buffers written inside the block belong to the file
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)
        stream.close()
        _outer_stdout.pop()


def where() -> str:
    """A line that says where vLLM's output went."""
    try:
        shown = log_file().relative_to(Path.cwd())
    except ValueError:
        shown = log_file()
    return f"vLLM's log (INFO and above, and native warnings from its C++ code): {shown}"


def error_lines(limit: int = 20) -> str:
    """The last ``limit`` lines of the log file that say ERROR or Traceback or come after one ('' if none)."""
    try:
        lines = log_file().read_text(errors="replace").splitlines()
    except OSError:
        return ""
    first = next((i for i, line in enumerate(lines) if " ERROR " in line or line.startswith("Traceback")), None)
    return "\n".join(lines[first:][-limit:]) if first is not None else ""


def add_log_note(error: BaseException) -> None:
    """Attach the log's path, and its error lines, to an exception raised by vLLM (shown under its traceback)."""
    errors = error_lines()
    error.add_note(where() + (f"\nIts error lines:\n{errors}" if errors else ""))
