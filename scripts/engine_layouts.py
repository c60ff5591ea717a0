"""Does vLLM's engine layout move speculation's gain at one request? The same paired measurement
(baseline against the profile's draft model, structured prompts, T = 0, one request at a time) in three engine
layouts, each in its own process, written to ``data/reference/engine_layouts-<profile>.csv`` for notebook 07.

- ``in-process``: the kit's offline engines (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): engine core and model in one
  process; torch uses every core.
- ``one-core``: the same, pinned to one core (``sched_setaffinity``, ``OMP_NUM_THREADS=1``).
- ``multiprocess``: vLLM's default layout, the one ``vllm serve`` runs: an EngineCore process and a Worker
  process; on the CPU vLLM binds the worker's OpenMP threads and keeps cores back for the other processes
  (``vllm/utils/ompmultiprocessing.py``, ``OMPProcessManager``: one core per worker on x86), so on 2 cores the
  model runs on one.

Same prompts, same tokens, same acceptance in each layout; what can differ is what a verify step costs (``c_eff``).
On the reference machine two rounds (2026-12-03) moved c_eff and the speedup within the spread between runs, in no
consistent direction by layout (docs/measurements.md, notebook 07). Run: ``.venv/bin/python scripts/engine_layouts.py`` (about
16 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers.served_findings import LAYOUTS  # noqa: E402  (notebook 07 reads the CSV by these names)

COLUMNS = ("speedup", "speedup_ci_low", "speedup_ci_high", "decode_speedup", "tpot_ms", "acceptance_rate",
           "tokens_per_verify_step", "c_eff", "pairs")


def measure(profile: str, n_prompts: int, max_tokens: int, repetitions: int) -> dict:
    """One layout (the one this process was started in): the speculative arm's summary row and the baseline's TPOT."""
    import torch

    from helpers.engines import EngineSpec, get_profile
    from helpers.timing import paired_runs, summarize
    from helpers.workloads import prompts

    k = get_profile(profile).k
    runs = paired_runs(EngineSpec(profile), [EngineSpec(profile, "draft_model", k=k)],
                       prompts("structured", n_prompts), temperature=0.0, max_tokens=max_tokens,
                       repetitions=repetitions)
    summary = summarize(runs).set_index("method")
    row = {c: summary.loc["draft_model", c] for c in COLUMNS}
    return {**{c: float(v) for c, v in row.items()}, "baseline_tpot_ms": float(summary.loc["baseline", "tpot_ms"]),
            "arm": summary.loc["draft_model", "arm"], "k": k, "torch_threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--layout", choices=LAYOUTS, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.layout:
        print("RESULT " + json.dumps(measure(args.profile, args.prompts, args.max_tokens, args.repetitions)))
        return
    import pandas as pd

    from helpers import hardware
    from scripts.write_provenance import git, vllm_version

    rows = []
    for layout in LAYOUTS:
        env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1" if layout == "multiprocess" else "0"}
        pin = None
        if layout == "one-core":
            env["OMP_NUM_THREADS"] = "1"
            pin = lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # noqa: E731
        child = subprocess.run([sys.executable, __file__, "--layout", layout, "--profile", args.profile,
                                "--prompts", str(args.prompts), "--max-tokens", str(args.max_tokens),
                                "--repetitions", str(args.repetitions)],
                               env=env, preexec_fn=pin, capture_output=True, text=True, cwd=ROOT)
        result = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
        if child.returncode or not result:
            raise SystemExit(f"{layout} failed (exit {child.returncode}):\n{child.stderr[-3000:]}")
        rows.append({"layout": layout, **json.loads(result[0][len("RESULT "):])})
        print(f"{layout}: {rows[-1]}", flush=True)
    table = pd.DataFrame(rows).assign(
        profile=args.profile, prompts=args.prompts, max_tokens=args.max_tokens, repetitions=args.repetitions,
        temperature=0.0, hardware=hardware.describe(), vllm=vllm_version(), commit=git("rev-parse", "--short", "HEAD"),
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"))
    out = ROOT / "data" / "reference" / f"engine_layouts-{args.profile}.csv"
    table.to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
