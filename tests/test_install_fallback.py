"""scripts/install_requirements.py: configured indexes first, PyTorch's CPU index only when torch is missing.

Runs pip for real against local indexes made here: a "primary" index without the pinned package and a
"torch CPU" index with it (a tiny wheel named ``torch``, version ``2.13.0+cpu``, installed into a scratch
folder with ``--target``, never into the venv)."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "install_requirements.py"


def make_wheel(index: Path, name: str, version: str) -> None:
    folder = index / name
    folder.mkdir(parents=True)
    dist = f"{name}-{version}.dist-info"
    filename = f"{name}-{version}-py3-none-any.whl"
    (folder / "index.html").write_text(f'<html><body><a href="{filename}">{filename}</a></body></html>')
    with zipfile.ZipFile(folder / filename, "w") as wheel:
        wheel.writestr(f"{name}_probe.py", "")
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{dist}/RECORD", "")


def install(tmp_path: Path, torch_index: Path) -> subprocess.CompletedProcess:
    primary = tmp_path / "primary"
    primary.mkdir(exist_ok=True)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.13.0+cpu\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=primary.as_uri(), PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", TORCH_CPU_INDEX=torch_index.as_uri())
    return subprocess.run([sys.executable, str(SCRIPT), str(requirements), "--target", str(tmp_path / "target"),
                           "--no-deps"], env=env, capture_output=True, text=True, timeout=300)


def test_falls_back_to_the_torch_cpu_index_when_torch_is_missing(tmp_path):
    torch_index = tmp_path / "torch-cpu"
    make_wheel(torch_index, "torch", "2.13.0+cpu")
    result = install(tmp_path, torch_index)
    assert result.returncode == 0, result.stderr
    assert "retrying with" in result.stdout
    assert (tmp_path / "target" / "torch_probe.py").exists()


def test_says_what_to_do_when_neither_index_has_torch(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = install(tmp_path, empty)
    assert result.returncode != 0
    assert "found neither on your configured indexes nor on" in result.stderr and "no macOS wheel" in result.stderr
