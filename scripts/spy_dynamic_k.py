"""Spy on vLLM's draft proposer: plain k vs a k-by-batch-size schedule, one request at a time, then the schedule's
k = 0 range with several requests. Prints per run: TPOT, verify steps, acceptance, and how often and how long
the model runner's ``execute_model`` and the drafter's ``propose`` ran.

Run alone (2 cores: anything else running skews the times): ``.venv/bin/python scripts/spy_dynamic_k.py``.
Add ``swap`` to build the schedule's engine first (an engine-order control).
"""

import functools
import sys
import time
from itertools import cycle, islice

import numpy as np

from helpers.engines import OPEN_END, EngineSpec, get_engine
from helpers.timing import request_timing, run, sampling_params
from helpers.workloads import prompts

SCHEDULE = ((1, 3, 4), (4, OPEN_END, 0))
ARMS = {"plain k=4": EngineSpec("cpu", "draft_model", k=4),
        "schedule": EngineSpec("cpu", "draft_model", k=4, k_per_batch_size=SCHEDULE)}
if "swap" in sys.argv:
    ARMS = dict(reversed(list(ARMS.items())))
calls: dict[tuple[str, str], list] = {}


def spy(arm: str, obj, attr: str) -> None:
    original = getattr(obj, attr)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            entry = calls.setdefault((arm, attr), [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - start
    setattr(obj, attr, timed)


def measured(arm: str, spec: EngineSpec, batch: list[str], params) -> tuple[dict, str]:
    before = {key: list(value) for key, value in calls.items()}
    result = run(spec, batch, params, batch=True)
    spent = [f"{attr} {n - before.get((a, attr), [0, 0])[0]} calls "
             f"{1000 * (s - before.get((a, attr), [0, 0.0])[1]) / max(n - before.get((a, attr), [0, 0])[0], 1):.1f} ms"
             for (a, attr), (n, s) in calls.items() if a == arm]
    return result, ", ".join(spent)


def main() -> None:
    params = sampling_params(0.0, 48, ignore_eos=True)
    for arm, spec in ARMS.items():
        core = get_engine(spec).llm_engine.engine_core.engine_core
        runner = core.model_executor.driver_worker.worker.model_runner
        spy(arm, runner, "execute_model")
        spy(arm, runner.drafter, "propose")
        print(f"{arm}: k by batch size {core.scheduler.dynamic_sd_lookup and core.scheduler.dynamic_sd_lookup[:6]}")
    tpots: dict[str, list[float]] = {arm: [] for arm in ARMS}
    one = prompts("structured", 1)
    for rep in range(8):
        for arm in (list(ARMS) if rep % 2 == 0 else list(ARMS)[::-1]):
            result, spent = measured(arm, ARMS[arm], one, params)
            tpot, c = request_timing(result["outputs"][0])["tpot_s"], result["counters"]
            if rep:  # the first round is the warm-up
                tpots[arm].append(tpot)
            print(f"rep {rep} {arm}: TPOT {1000 * tpot:.1f} ms, {c.drafts} verify steps, accepted "
                  f"{c.accepted}/{c.draft_tokens}; {spent}")
    for arm, values in tpots.items():
        print(f"{arm}: median TPOT {1000 * np.median(values):.1f} ms over {len(values)} runs")
    four = list(islice(cycle(prompts("structured")), 4))
    result, spent = measured("schedule", ARMS["schedule"], four, params)
    print(f"schedule, 4 requests at once (k = 0): {result['counters'].draft_tokens} draft tokens; {spent}")


if __name__ == "__main__":
    main()
