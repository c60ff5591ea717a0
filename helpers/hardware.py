"""A one-line description of the machine, for every figure and result row."""

from __future__ import annotations

import functools
import os
import platform


@functools.cache
def describe() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return f"{props.name} ({props.total_memory / 2**30:.0f} GiB)"
    except ImportError:
        pass
    return f"CPU: {cpu_model()} ({os.cpu_count()} cores)"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
