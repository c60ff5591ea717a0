"""One figure style for the kit; every figure says which hardware and models made it."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

from helpers import hardware

FIGURES = Path(os.environ.get("SPECDEC_FIGURES", Path(__file__).resolve().parent.parent / "build" / "figures"))


def setup_style() -> None:
    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    plt.rcParams.update({"figure.figsize": (8, 4.5), "figure.dpi": 100, "axes.titleweight": "bold"})


def label(fig, models: str, repetitions: int | None = None, extra: str = "") -> None:
    """A footer on ``fig``: hardware, models, repetitions."""
    parts = [hardware.describe(), models]
    if repetitions is not None:
        parts.append(f"{repetitions} repetition{'s' if repetitions != 1 else ''}")
    if extra:
        parts.append(extra)
    fig.text(0.01, 0.005, " | ".join(parts), fontsize=8, color="0.35", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))


def save(fig, name: str) -> None:
    """Write ``fig`` to ``build/figures/<name>.png``; returns nothing, so a notebook cell ending with it prints no path."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURES / f"{name}.png", bbox_inches="tight")
