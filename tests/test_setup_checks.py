"""`make` checks before it builds: a Python outside requires-python, and a venv installed from the other
requirements file (the other build of vLLM), each stop with what to do."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("version", "ok"), [("3.9", False), ("3.10", False), ("3.11", True), ("3.12", True),
                                             ("3.13", False)])
def test_python_outside_requires_python_is_refused(version, ok):
    out = subprocess.run([sys.executable, "scripts/check_python.py", "--version", version], cwd=ROOT,
                         capture_output=True, text=True)
    assert (out.returncode == 0) == ok, out.stderr
    if not ok:
        assert "PYTHON=python3.11" in out.stderr and ">=3.11,<3.13" in out.stderr


def test_switching_reqs_on_an_installed_venv_stops(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed").write_text("requirements/cpu.txt\n")

    def make(reqs):
        return subprocess.run(["make", "-s", "reqs-match", f"VENV={venv}", f"REQS={reqs}"], cwd=ROOT,
                              capture_output=True, text=True)

    assert make("requirements/cpu.txt").returncode == 0
    switched = make("requirements/gpu.txt")
    assert switched.returncode != 0
    assert "installed from requirements/cpu.txt, not requirements/gpu.txt" in switched.stderr
    assert "VENV=.venv-gpu" in switched.stderr
    (venv / ".installed").write_text("")  # a stamp from before the check: a CPU install
    assert make("requirements/gpu.txt").returncode != 0
