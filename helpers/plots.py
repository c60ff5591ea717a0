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


def served_speedup(compared, concurrencies, models: str, repetitions: int, footer: str):
    """Notebook 07's and ``helpers.decide``'s figure: measured served speedup per method against concurrency, with
    its interval, and the checklist's prediction where there is one."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (method, group) in enumerate(compared.groupby("method", sort=False)):
        x = group["concurrency"] * 1.06 ** (i - 0.5)  # side by side on the log axis
        ax.errorbar(x, group["speedup"], yerr=[group["speedup"] - group["speedup_ci_low"],
                                              group["speedup_ci_high"] - group["speedup"]],
                    marker="o", capsize=4, color=f"C{i}", label=f"{method}: measured")
        if "predicted" in group and group["predicted"].notna().any():
            ax.scatter(x, group["predicted"], marker="x", s=90, color=f"C{i}", label=f"{method}: checklist")
    ax.axhline(1, color="k", ls="--", lw=1, label="break-even")
    ax.set(xscale="log", xlabel="concurrent requests (--max-concurrency)", ylabel="speedup over the baseline",
           title=f"Served speedup; whiskers: {compared['interval'].iloc[0]}")
    ax.set_xticks(list(concurrencies), [str(c) for c in concurrencies])
    ax.minorticks_off()
    ax.legend(fontsize=8)
    label(fig, models, repetitions, f"{footer}, vllm bench serve")
    return fig
