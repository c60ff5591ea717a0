"""Build and install arctic-inference (vLLM's suffix decoding) from its source package, pinned.

PyPI has arctic-inference only as an sdist with C++ sources. Its build-system table asks for a CUDA-era torch,
so build isolation would pull a CUDA torch of several GB: the build runs in the kit's venv instead
(``--no-build-isolation``), with its build tools installed under a constraint that keeps every package already in
the venv at its version. CMake finds Python through PATH, so the venv's ``bin/`` goes first.

Its ``vllm.general_plugins`` entry point patches nothing unless ``ARCTIC_INFERENCE_ENABLED=1`` (and then it
demands CUDA); vLLM's ``method: "suffix"`` only imports ``arctic_inference.suffix_decoding``
(tests/test_suffix.py checks both). Run by ``make setup``; ``SPECDEC_SUFFIX=0`` skips it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERSION = "0.3.0"
# Its gRPC embedding server (the only user of grpcio-tools) is not needed: without grpcio-tools the build prints
# "Failed to generate gRPC code" and goes on, and the venv's protobuf stays as vLLM wants it.
BUILD_TOOLS = ["cmake==4.4.5", "ninja==1.13.2", "nanobind==2.9.2", "wheel==0.45.1"]


def installed() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("arctic-inference")
    except PackageNotFoundError:
        return None


def main() -> int:
    if os.environ.get("SPECDEC_SUFFIX", "1") == "0":
        print("suffix decoding: skipped (SPECDEC_SUFFIX=0); notebooks leave out its arm")
        return 0
    if installed() == VERSION:
        return 0
    pip = [sys.executable, "-m", "pip"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        frozen = subprocess.run(pip + ["freeze", "--exclude-editable"], check=True, capture_output=True,
                                text=True).stdout
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("\n".join(line for line in frozen.splitlines() if "==" in line) + "\n")
        steps = [
            pip + ["install", "-q", "-c", str(constraints)] + BUILD_TOOLS,
            pip + ["wheel", "-q", "--no-build-isolation", "--no-deps", "-w", tmp, f"arctic-inference=={VERSION}"],
        ]
        for step in steps:
            if subprocess.run(step, env=env).returncode != 0:
                print(f"suffix decoding: `{' '.join(step[2:])}` failed; the kit runs without it "
                      "(notebooks leave out its arm). Needs a C++ compiler (g++).", file=sys.stderr)
                return 0
        wheel = next(Path(tmp).glob("arctic_inference-*.whl"))
        subprocess.run(pip + ["install", "-q", "--no-deps", str(wheel)], check=True)
    print(f"suffix decoding: arctic-inference {VERSION} built and installed in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
