"""How much one run's acceptance at T > 0 varies from run to run, and whether batched and one-at-a-time runs differ.

The same engine (the profile's draft model, k = 4), the category's first 8 prompts, T = 1, 64 tokens; rounds alternate
a batched run and a one-request-at-a-time run (the engine's random state moves on each run). Prints each run's mean
tokens per verify step and per-prompt values. Run: ``.venv/bin/python scripts/measure_acceptance_spread.py``
(about 3 minutes on 2 cores)."""

import argparse
import time

import numpy as np

from helpers.engines import EngineSpec
from helpers.profiles import active_profile
from helpers.timing import request_timing, run, sampling_params, tokens_per_decode_step
from helpers.workloads import prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--category", default="structured")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    spec = EngineSpec(active_profile().name, "draft_model", k=4)
    messages = prompts(args.category, 8)
    params = sampling_params(args.temperature, 64)
    for r in range(args.rounds):
        for mode in ("batched", "single"):
            start = time.time()
            result = run(spec, messages, params, batch=mode == "batched")
            taus = [tokens_per_decode_step(request_timing(o)) for o in result["outputs"]]
            print(f"round {r} {mode:8s} mean tau {np.mean(taus):.3f}  {np.round(taus, 2).tolist()}  "
                  f"{time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
