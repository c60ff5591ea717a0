"""Measure the README's acceptance table: acceptance rate and mean acceptance length by temperature, category and
speculation method (draft model with greedy and with probabilistic drafting, n-gram), the first N prompts of each
category (spread over its subcategories) submitted together. Writes build/results/acceptance_by_temperature.csv
and prints the table as Markdown."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from helpers import hardware
from helpers.engines import EngineSpec, shutdown_engine
from helpers.profiles import active_profile
from helpers.results import markdown
from helpers.timing import run, sampling_params
from helpers.workloads import CATEGORIES, prompts

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4, help="prompts per category")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    args = parser.parse_args()
    profile = active_profile()
    arms = {"draft model, greedy drafting": EngineSpec(profile.name, "draft_model", k=profile.k),
            "draft model, probabilistic drafting": EngineSpec(profile.name, "draft_model", k=profile.k,
                                                              draft_sample_method="probabilistic"),
            "n-gram": EngineSpec(profile.name, "ngram", k=profile.k)}
    rows, start = [], time.perf_counter()
    for name, spec in arms.items():
        for category in CATEGORIES:
            for temperature in args.temperatures:
                c = run(spec, prompts(category, args.prompts), sampling_params(temperature, args.max_tokens),
                        batch=True)["counters"]
                rows.append({"category": category, "method": name, "temperature": temperature,
                             "acceptance_rate": c.acceptance_rate, "mean_acceptance_length": c.mean_acceptance_length,
                             "accepted": c.accepted, "draft_tokens": c.draft_tokens})
                print(rows[-1], flush=True)
        shutdown_engine()
    table = pd.DataFrame(rows)
    out = ROOT / "build" / "results"
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "acceptance_by_temperature.csv", index=False)
    cells = table.assign(cell=[f"{r:.2f} / {m:.2f}" for r, m in zip(table["acceptance_rate"],
                                                                    table["mean_acceptance_length"])])
    wide = cells.pivot_table(index=["category", "method"], columns="temperature", values="cell", aggfunc="first")
    wide.columns = [f"T = {t:g}" for t in wide.columns]
    print(markdown(wide.reset_index()))
    print(f"k = {profile.k}, draft {profile.default_draft}, {args.prompts} prompts per category submitted together, "
          f"{args.max_tokens} tokens, {time.perf_counter() - start:.0f} s in all; {hardware.describe()}")


if __name__ == "__main__":
    main()
