"""Why a plain decode step of 2 sequences costs more than one of 1 or 4 on the reference CPU (06's held-out misses).

Times the baseline engine's decode step at 1-8 concurrent requests (the structured prompts of 06, 48 tokens, T = 0,
twice), then profiles one run at 1, 2 and 4 requests with torch's profiler and prints each op's self CPU time per
run, largest first. Run alone: ``.venv/bin/python scripts/profile_batch_steps.py`` (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import statistics

from torch.profiler import ProfilerActivity, profile

from helpers import timing, workloads
from helpers.engines import EngineSpec

SIZES, PROFILED, TOKENS = (1, 2, 3, 4, 5, 6, 8), (1, 2, 4), 48


def step_ms(outputs) -> float:
    steps = [timing.request_timing(o) for o in outputs]
    return statistics.median(1000 * s["decode_s"] / (s["output_tokens"] - 1) for s in steps)


def main() -> None:
    spec = EngineSpec("cpu")
    prompts = workloads.ordered("structured")["prompt"].tolist()[:8]
    params = timing.sampling_params(0.0, max_tokens=TOKENS)
    timing.run(spec, prompts[:4], params, concurrency=4)  # warm-up
    print("median decode step (ms) per concurrent requests, two rounds:")
    for round_ in range(2):
        # 8 prompts where n divides 8 (06's waves), else one wave of n
        print(round_, {n: round(step_ms(timing.run(spec, prompts if 8 % n == 0 else prompts[:n], params,
                                                    concurrency=n)["outputs"]), 1) for n in SIZES})
    self_ms = {}
    for n in PROFILED:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            timing.run(spec, prompts[:n], params, concurrency=n)
        self_ms[n] = {e.key: e.self_cpu_time_total / 1000 for e in prof.key_averages()}
    print(f"self CPU time (ms) of one run of {TOKENS} tokens per request at {PROFILED} requests:")
    ops = sorted(set().union(*self_ms.values()), key=lambda k: -max(s.get(k, 0) for s in self_ms.values()))
    for op in ops[:12]:
        print(f"{op[:50]:50s}", " ".join(f"{self_ms[n].get(op, 0):8.1f}" for n in PROFILED))


if __name__ == "__main__":
    main()
