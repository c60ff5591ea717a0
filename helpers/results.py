"""Measured results as CSV under build/results/, so later notebooks (and the checklist) can reuse them; and the
reference results the kit ships under data/reference/<profile>/, measured in full mode with their provenance."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd

from helpers import fast

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("SPECDEC_RESULTS", ROOT / "build" / "results"))
REFERENCE = ROOT / "data" / "reference"
PROVENANCE = "provenance.json"
# What the reference results depend on besides the code: the prompt suite and the drafts' and EAGLE-3 heads' weights
# and training (each manifest holds its weights' sha256).
INPUTS = ("data/prompts", "drafts/manifest.json", "drafts/eagle3.json")


def path_for(name: str) -> Path:
    return RESULTS / f"{name}{'.fast' if fast.FAST else ''}.csv"


def save(frame: pd.DataFrame, name: str) -> Path:
    """Write ``frame`` (whose rows already carry hardware, profile, models, method, k, temperature, repetitions)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = path_for(name)
    frame.to_csv(path, index=False)
    return path


def load(name: str) -> pd.DataFrame | None:
    path = path_for(name)
    return pd.read_csv(path) if path.exists() else None


def input_hashes(root: Path = ROOT) -> dict[str, str]:
    """sha256 of each input the reference depends on (a folder: over its files' names and bytes, sorted)."""
    hashes = {}
    for name in INPUTS:
        path = root / name
        digest = hashlib.sha256()
        for file in sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()):
            digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
        hashes[name] = digest.hexdigest()
    return hashes


def provenance(profile: str = "cpu") -> dict | None:
    path = REFERENCE / profile / PROVENANCE
    return json.loads(path.read_text()) if path.exists() else None


def stale_reasons(profile: str = "cpu") -> list[str]:
    """Why the shipped reference for ``profile`` no longer matches the kit's inputs (empty when it does)."""
    record = provenance(profile)
    if record is None:
        return [f"no reference results for profile {profile!r} ({REFERENCE / profile / PROVENANCE} is missing)"]
    reasons = [f"{name} changed since the reference was measured" for name, digest in input_hashes().items()
               if record["inputs"].get(name) != digest]
    reasons += [f"{file} is listed in the provenance but missing" for file in record["files"]
                if not (REFERENCE / profile / file).exists()]
    return reasons


def load_reference(name: str, profile: str = "cpu") -> pd.DataFrame | None:
    """The shipped reference result ``name`` for ``profile``, or None if the kit ships none."""
    path = REFERENCE / profile / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def reference_label(profile: str = "cpu") -> str:
    """'reference: <hardware>, <date>, <mode> mode' for labelling the shipped results beside this machine's."""
    record = provenance(profile)
    if not record:
        return "no reference"
    hardware = record["hardware"]
    if record.get("cpu_features") and ";" not in hardware:  # recorded apart (a reference from before describe() did)
        hardware = hardware.removesuffix(")") + "; " + ", ".join(record["cpu_features"]) + ")"
    return f"reference: {hardware}, {record['date']}, {record['mode']} mode"


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table, floats to two decimals (for the README)."""
    def cell(value) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
