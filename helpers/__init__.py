"""specdec-workshop's helpers.

Importing the package changes nothing: it is also imported by vLLM's plugin loader (``helpers.cpu_expand_fix``,
an entry point) in any ``vllm serve`` of the same environment. Where vLLM's output goes is set by
``helpers.logs.configure()``, which ``helpers.engines`` calls when it is imported (see ``helpers/logs.py``).
"""

import re

VLLM_LOG_LINE = re.compile(r"^(?:\([^)\n]*\)\s*)?(INFO|WARNING|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)
# what torch's and vLLM's C++ code writes to file descriptor 2 ("[W1204 13:44:00.324773712 utils.cpp:68] ...")
NATIVE_LINE = re.compile(r"^\[[WE]\d{4} \d\d:\d\d:\d\d", re.MULTILINE)


def vllm_log_lines(text: str) -> dict[str, int]:
    """vLLM log lines ("INFO 12-03 10:24:15 [file.py:12] ...", also "(EngineCore pid=1) INFO ...") in ``text``,
    by level, and native warning lines of its C++ code ("NATIVE")."""
    counts = {"INFO": 0, "WARNING": 0, "DEBUG": 0, "NATIVE": len(NATIVE_LINE.findall(text))}
    for match in VLLM_LOG_LINE.finditer(text):
        counts[match.group(1)] += 1
    return counts
