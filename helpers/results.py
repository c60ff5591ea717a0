"""Measured results as CSV under build/results/, so later notebooks (and the checklist) can reuse them."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from helpers import fast

RESULTS = Path(os.environ.get("SPECDEC_RESULTS", Path(__file__).resolve().parent.parent / "build" / "results"))


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


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table, floats to two decimals (for the README)."""
    def cell(value) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
