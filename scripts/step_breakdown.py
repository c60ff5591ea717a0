"""Where the time of one engine step goes, in-engine: the baseline against each speculative arm, one request at a
time, on the suite's prompts of each chosen category and temperature (default: structured, T = 0).

Spies on vLLM's model runner (the CPU runner inherits these from ``GPUModelRunner``) time each decode step's parts:
``_model_forward`` (the target's forward pass: 1 token, or k + 1 when verifying), the rest of ``execute_model``
(input preparation, logits), ``_sample`` (sampler / rejection sampler), ``propose_draft_token_ids`` (the drafter),
the rest of ``sample_tokens`` (bookkeeping), and what is left of the step's period (scheduler, output processing,
detokenisation: the time from one step's start to the next's). A step is a decode step when it schedules at most
k + 1 tokens per request; prefill steps are left out. The arms take turns prompt by prompt (every engine stays
live), so that a machine whose speed drifts over minutes slows them alike; the same pairs give each arm's end-to-end
speedup per prompt, with the interval over prompts. Prints one row per arm, category and temperature (ms per
decode step; ratios against the baseline of the same category and temperature) and what tokens per verify step each
arm would need for ``--target``x; writes build/results/step_breakdown.csv, and every decode step (with ``verified``:
whether the rejection sampler ran) to build/results/step_breakdown_steps.csv.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import pandas as pd
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from helpers import engines, hardware
from helpers.engines import EngineSpec
from helpers.profiles import active_profile, with_eagle_heads
from helpers.results import markdown
from helpers.timing import request_timing, run, sampling_params, speedup_interval
from helpers.workloads import prompts

ROOT = Path(__file__).resolve().parent.parent
PARTS = {"_model_forward": "target_forward_ms", "_sample": "sampler_ms", "propose_draft_token_ids": "draft_ms"}
steps: list[dict] = []


def spy(name: str):
    original = getattr(GPUModelRunner, name)

    @functools.wraps(original)
    def timed(self, *args, **kwargs):
        if name == "execute_model":
            steps.append({"start": time.perf_counter(), "tokens": args[0].total_num_scheduled_tokens})
        if name == "_sample" and steps:  # (logits, spec_decode_metadata): the rejection sampler ran when it is set
            steps[-1]["verified"] = float((args[1] if len(args) > 1 else kwargs.get("spec_decode_metadata")) is not None)
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            if steps:
                key = PARTS.get(name, f"{name}_ms")
                steps[-1][key] = steps[-1].get(key, 0.0) + 1000 * (time.perf_counter() - start)

    setattr(GPUModelRunner, name, timed)


def run_prompt(spec: EngineSpec, prompt: str, params, decode_limit: int) -> tuple[list[dict], object]:
    """One request; its decode steps (with each step's period) and vLLM's output."""
    steps.clear()
    result = run(spec, [prompt], params)
    ends = [s["start"] for s in steps[1:]]  # a step's period ends where the next one starts
    return [dict(s, period_ms=1000 * (end - s["start"])) for s, end in zip(steps, ends)
            if 0 < s["tokens"] <= decode_limit], result


def measure(arms: list[EngineSpec], category: str, chosen: list[str], params, k: int, per_step: list,
            repetitions: int = 1) -> list[dict]:
    """Every arm on every prompt, interleaved: prompt by prompt, each arm in turn (the order rotating), so that a
    machine whose speed drifts over minutes (shared hosts do) slows every arm alike instead of whichever ran then.
    Besides the step parts, each arm's end-to-end speedup over the baseline (the first arm): per prompt the median
    over repetitions of baseline time / arm time for the same request, with the interval over prompts."""
    engines.MAX_LIVE = max(engines.MAX_LIVE, len(arms))  # every arm's engine stays live between its turns
    for spec in arms:
        run(spec, chosen[:1], params)  # warm-up: the engine is built and its first request is not timed
    seen = {spec: {"rows": [], "tokens": 0, "accepted": 0, "drafts": 0, "e2e_s": {}, "text": {}} for spec in arms}
    turn = 0
    for repetition in range(repetitions):
        for index, prompt in enumerate(chosen):
            for spec in arms[turn % len(arms):] + arms[:turn % len(arms)]:
                rows, result = run_prompt(spec, prompt, params, 1 if spec.method == "baseline" else k + 1)
                arm = seen[spec]
                arm["rows"] += [dict(r, prompt=index, repetition=repetition) for r in rows]
                arm["tokens"] += len(result["outputs"][0].outputs[0].token_ids)
                arm["accepted"] += result["counters"].accepted
                arm["drafts"] += result["counters"].draft_tokens
                arm["e2e_s"][repetition, index] = request_timing(result["outputs"][0])["e2e_s"]
                arm["text"][repetition, index] = list(result["outputs"][0].outputs[0].token_ids)
            turn += 1
    engines.shutdown_engine()
    base = seen[arms[0]]["e2e_s"]
    out = []
    for spec in arms:
        row = summarize_arm(spec, seen[spec], category, params, per_step)
        pairs = seen[spec]["e2e_s"]
        gain = speedup_interval([base[key] / pairs[key] for key in pairs], [index for _, index in pairs])
        # at T = 0 a lossless method writes the baseline's tokens (float32); in bfloat16 only up to numerics
        same = sum(seen[arms[0]]["text"][key] == seen[spec]["text"][key] for key in pairs)
        out.append(row | {"e2e_speedup": round(gain["speedup"], 3), "e2e_low": round(gain["low"], 3),
                          "e2e_high": round(gain["high"], 3), "e2e_interval": gain["interval"],
                          "repetitions": repetitions, "requests_identical_to_baseline": f"{same} of {len(pairs)}"})
    return out


def summarize_arm(spec: EngineSpec, arm: dict, category: str, params, per_step: list) -> dict:
    frame = pd.DataFrame(arm["rows"]).fillna(0.0)
    frame["prep_and_logits_ms"] = frame["execute_model_ms"] - frame["target_forward_ms"]
    frame["bookkeeping_ms"] = frame["sample_tokens_ms"] - frame["sampler_ms"] - frame.get("draft_ms", 0.0)
    frame["scheduler_and_output_ms"] = frame["period_ms"] - frame["execute_model_ms"] - frame["sample_tokens_ms"]
    labels = {"category": category, "temperature": params.temperature, "arm": spec.label()}
    per_step.append(frame.assign(**labels))
    cols = ["period_ms", "target_forward_ms", "prep_and_logits_ms", "sampler_ms", "draft_ms", "bookkeeping_ms",
            "scheduler_and_output_ms"]
    out = {"hardware": hardware.describe(), **labels, "decode_steps": len(frame)}
    out |= {c: round(frame[c].mean(), 2) if c in frame else 0.0 for c in cols}
    # tokens per decode step: every request's tokens after the first (the prefill step writes one), over its decode
    # steps (each request's last step has no next start to time it, but it wrote tokens: it counts here)
    requests = len(arm["e2e_s"])  # one end-to-end time per request
    out["tokens_per_step"] = round((arm["tokens"] - requests) / (len(frame) + requests), 3)
    out["acceptance_rate"] = round(arm["accepted"] / arm["drafts"], 3) if arm["drafts"] else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repetitions", type=int, default=1, help="passes over the prompts, every arm each time")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--target", type=float, default=2.0)
    parser.add_argument("--categories", nargs="+", default=["structured"])
    parser.add_argument("--temperatures", nargs="+", type=float, default=[0.0])
    parser.add_argument("--methods", nargs="+", default=["baseline", "draft_model", "eagle3", "ngram"],
                        help="baseline first; eagle3 runs every head of the profile (or of --eagle-heads)")
    parser.add_argument("--eagle-heads", nargs="+", metavar="NAME[=PATH]",
                        help="the EAGLE-3 heads to time: a head of the profile by name, or another by NAME=PATH")
    args = parser.parse_args()
    for name in ("execute_model", "sample_tokens", *PARTS):
        spy(name)
    profile = active_profile()
    if args.eagle_heads:
        profile = with_eagle_heads(profile, args.eagle_heads)
    arms = []
    for method in args.methods:
        if method == "baseline":
            arms.append(EngineSpec(profile.name))
        elif method == "eagle3":
            arms += [EngineSpec(profile.name, "eagle3", k=args.k, draft=head) for head in profile.eagle_heads]
        else:
            arms.append(EngineSpec(profile.name, method, k=args.k))
    tables, per_step = [], []
    for category in args.categories:
        for temperature in args.temperatures:
            chosen, params = prompts(category, args.prompts), sampling_params(temperature, args.max_tokens)
            table = pd.DataFrame(measure(arms, category, chosen, params, args.k, per_step, args.repetitions))
            base = table["period_ms"].iloc[0] / table["tokens_per_step"].iloc[0]
            table["step_cost_ratio"] = (table["period_ms"] / table["period_ms"].iloc[0]).round(3)
            table["decode_speedup"] = (base * table["tokens_per_step"] / table["period_ms"]).round(3)
            table[f"tokens_per_step_for_{args.target:g}x"] = (args.target * table["step_cost_ratio"]).round(2)
            tables.append(table)
            print(markdown(table), flush=True)
    table = pd.concat(tables, ignore_index=True).assign(dtype=profile.dtype)
    path = ROOT / "build" / "results" / "step_breakdown.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    steps_path = path.with_name("step_breakdown_steps.csv")  # every decode step, for splits the table does not make
    pd.concat(per_step, ignore_index=True).drop(columns="start").to_csv(steps_path, index=False)
    print(f"-> {path.relative_to(ROOT)}, {steps_path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
