"""Measure the README's table: baseline, each draft candidate and n-gram, on a JSON and a creative prompt,
at temperature 0 and 1. Paired, interleaved repetitions; writes build/results/speculation_table.csv and
prints the table as Markdown."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from helpers.engines import EngineSpec, shutdown_engine
from helpers.profiles import active_profile
from helpers.results import markdown
from helpers.timing import paired_runs, summarize

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = {
    "JSON": 'Return only a JSON object with the keys "name", "price", "tags" and "in_stock" for a blue ceramic mug.',
    "creative": "Write a short poem about a fox crossing a frozen river.",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    profile = active_profile()
    arms = [EngineSpec(profile.name, "draft_model", k=profile.k, draft=name) for name in profile.drafts]
    arms.append(EngineSpec(profile.name, "ngram", k=profile.k))
    summaries = []
    start = time.perf_counter()
    for workload, prompt in PROMPTS.items():
        for temperature in (0.0, 1.0):
            for arm in arms:
                runs = paired_runs(EngineSpec(profile.name), [arm], [prompt], temperature=temperature,
                                   max_tokens=args.max_tokens, repetitions=args.repetitions,
                                   tags={"workload": workload})
                summary = summarize(runs)
                summary["workload"] = workload
                summaries.append(summary if arm == arms[0] else summary[summary["arm"] != "baseline"])
                print(summary[["workload", "temperature", "arm", "tok_per_s", "speedup"]].to_string(header=False),
                      flush=True)
            shutdown_engine()
    table = pd.concat(summaries, ignore_index=True)
    out = ROOT / "build" / "results"
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "speculation_table.csv", index=False)
    cols = ["workload", "temperature", "arm", "tok_per_s", "tpot_ms", "acceptance_rate", "mean_acceptance_length",
            "speedup", "speedup_ci_low", "speedup_ci_high", "interval"]
    print(markdown(table[cols]))
    print(f"{args.repetitions} repetitions, {args.max_tokens} tokens, {time.perf_counter() - start:.0f} s in all; "
          f"{table.iloc[0]['hardware']}")


if __name__ == "__main__":
    main()
