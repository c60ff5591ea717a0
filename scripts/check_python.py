"""Refuse a Python outside pyproject.toml's requires-python before a venv is built from it (run by `make`).

Runs on any Python 3 (no third-party imports): ``python3 scripts/check_python.py [--version X.Y]``."""

import re
import sys
from pathlib import Path

TESTED = "3.11"  # the version every measurement and CI run of the kit used


def allowed(spec: str, version: tuple[int, int]) -> bool:
    """Whether ``version`` meets a requires-python made of '>=X.Y' and '<X.Y' clauses."""
    for op, major, minor in re.findall(r"(>=|<)\s*(\d+)\.(\d+)", spec):
        bound = (int(major), int(minor))
        if (op == ">=" and version < bound) or (op == "<" and version >= bound):
            return False
    return True


def requires_python() -> str:
    """pyproject.toml's requires-python, e.g. '>=3.11,<3.13'."""
    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    return re.search(r'^requires-python\s*=\s*"([^"]+)"', text, re.MULTILINE).group(1)


def main() -> None:
    spec = requires_python()
    if len(sys.argv) == 3 and sys.argv[1] == "--version":
        version = tuple(int(p) for p in sys.argv[2].split(".")[:2])
    else:
        version = sys.version_info[:2]
    if not allowed(spec, version):
        sys.exit(f"Python {version[0]}.{version[1]} ({sys.executable}) is outside the kit's requires-python "
                 f"({spec}). Point make at a supported one, e.g. `make setup PYTHON=python{TESTED}` "
                 f"(the kit is tested on {TESTED}).")


if __name__ == "__main__":
    main()
