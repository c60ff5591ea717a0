"""Write provenance.json beside freshly measured reference results (``make reference`` calls this last).

Records the date, the kit's commit (and whether the tree had uncommitted changes), the vLLM version, the hardware,
the CPU features vLLM-CPU branches on, the mode, the hashes of the inputs the results depend on, and per CSV its rows
and repetitions.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import subprocess
from pathlib import Path

import pandas as pd

from helpers import fast, hardware
from helpers.results import PROVENANCE, ROOT, input_hashes


def vllm_version() -> str:
    for name in ("vllm-cpu", "vllm"):
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--commit", help="the commit the notebooks ran at (default: HEAD now, and whether "
                                         "helpers/ or notebooks/ have uncommitted changes now)")
    args = parser.parse_args()
    folder = args.folder
    files = sorted(p.name for p in folder.glob("*.csv"))
    if not files:
        raise SystemExit(f"no CSV results in {folder}: run the notebooks first")
    record = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "commit": args.commit or git("rev-parse", "--short", "HEAD") + (
            " (with uncommitted changes)" if git("status", "--porcelain", "helpers", "notebooks") else ""),
        "vllm": vllm_version(), "hardware": hardware.describe(),
        "cpu_features": hardware.cpu_features(), "mode": fast.MODE, "inputs": input_hashes(),
        "files": {name: {"rows": len(frame := pd.read_csv(folder / name)),
                         "repetitions": sorted(int(r) for r in frame["repetitions"].dropna().unique())
                         if "repetitions" in frame else []} for name in files},
    }
    (folder / PROVENANCE).write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {folder / PROVENANCE}: {len(files)} result files, {record['mode']} mode, {record['hardware']}")


if __name__ == "__main__":
    main()
