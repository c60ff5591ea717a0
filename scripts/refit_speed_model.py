"""Refit the speed model on a reference's own measurements, as notebook 06 does, after a change to the model alone.

Reads 04's, 05's and 06's result CSVs from a reference folder (default: data/reference/cpu), fits the model of
``helpers.speed_model`` at the current commit, and rewrites the folder's 06_speed_model.csv and 06_held_out.csv. The
measurements are not touched; the provenance records the refit under ``edits`` (date and commit), since the model's
files then come from a later commit than the measurements. Prints the held-out coverage and median width.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
from pathlib import Path

import pandas as pd

from helpers import speed_model
from helpers.results import PROVENANCE, REFERENCE, ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path, nargs="?", default=REFERENCE / "cpu")
    parser.add_argument("--knee", type=int, help="the knee (speed_model.gemm_knee) of the machine that measured the "
                        "folder; default: the one its model was fitted with (1 for a model saved before the knee)")
    args = parser.parse_args()
    folder = args.folder
    frames = {name: pd.read_csv(path) if (path := folder / f"{name}.csv").exists() else None
              for name in ("04_structured_vs_creative", "05_long_context", "06_concurrency", "04_acceptance")}
    if frames["06_concurrency"] is None:
        raise SystemExit(f"{folder} has no 06_concurrency.csv: the model is fitted by notebook 06's measurements")
    knee = args.knee
    if knee is None:
        saved = folder / f"{speed_model.MODEL_FILE}.csv"
        knee = speed_model.from_frame(pd.read_csv(saved)).knee if saved.exists() else 1
    _, costs, held = speed_model.fit_and_hold_out(*frames.values(), knee=knee)
    speed_model.to_frame(costs).to_csv(folder / f"{speed_model.MODEL_FILE}.csv", index=False)
    held.to_csv(folder / "06_held_out.csv", index=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    record_path = folder / PROVENANCE
    record = json.loads(record_path.read_text())
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    record.setdefault("edits", []).append(
        f"{today}: {speed_model.MODEL_FILE}.csv and 06_held_out.csv refitted by scripts/refit_speed_model.py at "
        f"{commit} (knee {knee}) from this folder's measurements, which are unchanged")
    for name in (f"{speed_model.MODEL_FILE}.csv", "06_held_out.csv"):
        record["files"][name]["rows"] = len(pd.read_csv(folder / name))
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    cover = speed_model.coverage(held)
    print(f"{folder} (knee {knee}): held out {cover['points']} points, {cover['inside']:.0%} inside their 95% intervals, "
          f"median width {cover['median_width']:.2f}")


if __name__ == "__main__":
    main()
