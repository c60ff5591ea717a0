"""The kit's measurement sweeps, shared by the notebooks that show them and the checklist that reuses them.

Each sweep is a loop of :func:`helpers.timing.paired_runs` (paired, interleaved, warm-up excluded) and
returns tidy rows; every row carries hardware, profile, models, method, k, temperature and repetitions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from helpers.engines import OPEN_END, EngineSpec, get_engine
from helpers.timing import (
    describe_spec,
    paired_runs,
    request_timing,
    run,
    sampling_params,
    speedup_interval,
    summarize,
    tokens_per_decode_step,
)
from helpers.workloads import long_context_prompt, ordered, prompts

GridPoint = tuple[str, float, str, int]  # category, temperature, method, k


def progress(items: Sequence, what: str, unit: str = "point"):
    """``items`` with a progress bar: items done out of the total and the elapsed time (a widget in JupyterLab)."""
    from tqdm.auto import tqdm

    return tqdm(items, desc=what, unit=unit)


META = ("hardware", "profile", "target", "draft", "method", "k", "temperature", "repetitions")


def category_grid(profile: str, points: Sequence[GridPoint], n_prompts: int, max_tokens: int,
                  repetitions: int, acceptance_prompts: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One summary row per (category, temperature, method, k): the arm against the baseline on the category's first
    ``n_prompts`` prompts, one request at a time; and, from one batched untimed run of the same engine over the
    category's first ``acceptance_prompts`` (all when None), each prompt's acceptance (:func:`acceptance`).
    Suffix decoding runs without its global tree of earlier answers (``suffix_cached_requests=0``): otherwise a
    prompt's own earlier answer, from the warm-up, another temperature or the acceptance run, would draft it."""
    summaries, accepted = [], []
    for category, temperature, method, k in progress(points, "04 grid points"):
        arm = EngineSpec(profile, method, k=k, suffix_cached_requests=0 if method == "suffix" else None)
        runs = paired_runs(EngineSpec(profile), [arm], prompts(category, n_prompts),
                           temperature=temperature, max_tokens=max_tokens, repetitions=repetitions,
                           tags={"category": category})
        summaries.append(summarize(runs).query("arm != 'baseline'").assign(category=category))
        per_prompt = acceptance(arm, prompts(category, acceptance_prompts), temperature, max_tokens)
        subcategory = ordered(category)["subcategory"]
        accepted.append(per_prompt.assign(category=category, subcategory=subcategory[per_prompt["prompt_index"]].values))
    return pd.concat(summaries, ignore_index=True), pd.concat(accepted, ignore_index=True)


def acceptance(spec: EngineSpec, messages: Sequence[str], temperature: float, max_tokens: int,
               repeat: bool | None = None) -> pd.DataFrame:
    """Per prompt: draft tokens accepted, decode steps and tokens per decode step (``tau``), from one batched,
    untimed run of all ``messages`` on ``spec``'s engine (vLLM's per-request counters). At temperature 0 a batched
    run accepts what one request at a time does, up to batch-dependent rounding; notebook 04 prints both.

    ``repeat`` (default: at T > 0) runs the batch a second time on the same engine, whose random state has moved on:
    ``tau_repeat`` is each prompt's tau in that second, independent sample. Sampled answers differ run to run, and
    a prompt's steps are not independent draws (one sampled token changes the rest of the answer), so the spread
    between the two samples, not ``tau_se``, is what says how far another run's acceptance may fall."""
    repeat = temperature > 0 if repeat is None else repeat
    params = sampling_params(temperature, max_tokens)
    result = run(spec, messages, params, batch=True)
    again = run(spec, messages, params, batch=True)["outputs"] if repeat else [None] * len(messages)
    info = describe_spec(spec)
    rows = []
    for index, (output, second) in enumerate(zip(result["outputs"], again)):
        timing = request_timing(output)
        rows.append({**{c: info[c] for c in ("profile", "method", "k", "arm")}, "temperature": temperature,
                     "prompt_index": index, "prompt_tokens": timing["prompt_tokens"],
                     "output_tokens": timing["output_tokens"], "accepted": timing["accepted"],
                     "verify_steps": timing["verify_steps"], "drafted_steps": timing["drafted_steps"],
                     "draft_tokens": timing["draft_tokens"], "tau": tokens_per_decode_step(timing),
                     "tau_se": _tau_se(timing["step_histogram"], timing["verify_steps"]),
                     "tau_repeat": tokens_per_decode_step(request_timing(second)) if second is not None else float("nan")})
    return pd.DataFrame(rows)


def _tau_se(histogram: Sequence[int], steps: float) -> float:
    """Standard error of a request's tokens per decode step from its steps: ``histogram[j]`` steps accepted j drafted
    tokens (j + 1 tokens each); the steps that proposed nothing emitted 1 token each."""
    if not len(histogram) or not steps > 1:
        return float("nan")
    tokens = np.repeat(np.arange(1, len(histogram) + 1), histogram)
    tokens = np.concatenate([tokens, np.ones(max(int(round(steps - len(tokens))), 0))])
    return float(tokens.std(ddof=1) / np.sqrt(len(tokens)))


def acceptance_summary(per_prompt: pd.DataFrame, keys=("category", "temperature", "method", "k")) -> pd.DataFrame:
    """Per (category, temperature, method, k): prompts, acceptance rate, mean tokens per decode step (tau) with a
    95% t interval over prompts (the prompts are the sample; NaN below 3 prompts)."""
    from scipy.stats import t

    rows = []
    for key, group in per_prompt.groupby(list(keys), sort=False):
        tau = group["tau"].dropna().to_numpy()
        n = len(tau)
        half = t.ppf(0.975, n - 1) * tau.std(ddof=1) / np.sqrt(n) if n >= 3 else float("nan")
        draft_tokens = group["draft_tokens"].sum()
        rows.append({**dict(zip(keys, key)), "prompts": n, "tau": float(tau.mean()) if n else float("nan"),
                     "tau_low": float(tau.mean() - half), "tau_high": float(tau.mean() + half),
                     "acceptance_rate": float(group["accepted"].sum() / draft_tokens) if draft_tokens else float("nan")})
    return pd.DataFrame(rows)


def long_context_sweep(profile: str, arms: Sequence[EngineSpec], lengths: Sequence[int], n_prompts: int,
                       max_tokens: int, repetitions: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Baseline against each of ``arms`` on long-context prompts of each length, temperature 0.

    Each length uses ``n_prompts`` different documents (RAG-style prompts from the suite), cut to the length.
    Each arm is paired with its own baseline runs (two engines live at a time), tagged ``vs``.
    Returns the per-request rows and, per (arm, length), median TTFT, decode and end-to-end time with the
    end-to-end speedup and its CI.
    """
    tokenizer = get_engine(EngineSpec(profile)).get_tokenizer()
    messages = {n: [long_context_prompt(tokenizer, n, entry=i)[0] for i in range(n_prompts)] for n in lengths}
    runs, summaries = [], []
    for arm, length in progress([(a, n) for a in arms for n in lengths], "arm x prompt length"):
        paired = paired_runs(EngineSpec(profile), [arm], messages[length], temperature=0.0,
                             max_tokens=max_tokens, repetitions=repetitions,
                             tags={"prompt_length": length, "vs": arm.label()})
        medians = paired.groupby("arm")[["prompt_tokens", "ttft_s", "decode_s", "e2e_s"]].median()
        summary = summarize(paired).drop(columns="prompt_tokens").merge(medians, left_on="arm", right_index=True)
        summaries.append(summary.assign(prompt_length=length, vs=arm.label()))
        runs.append(paired)
    return pd.concat(runs, ignore_index=True), pd.concat(summaries, ignore_index=True)


def batch_sweep(profile: str, arms: Sequence[EngineSpec], sizes: Sequence[int], max_tokens: int, repetitions: int,
                category: str = "structured", temperature: float = 0.0,
                n_prompts: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Baseline against each of ``arms`` on the same requests at every concurrency ``n`` in ``sizes``: the category's
    first ``n_prompts`` prompts (default: the largest size), submitted in waves of ``n`` at a time. Only the number
    of concurrent sequences changes from one size to the next, never the prompts.

    ``ignore_eos`` makes every request write ``max_tokens``. Returns the per-request rows and
    :func:`throughput_summary` per (arm, size).
    """
    requests = prompts(category, n_prompts or max(sizes))
    if max(sizes) > len(requests):
        raise ValueError(f"concurrency {max(sizes)} needs at least as many requests; {category!r} gives "
                         f"{len(requests)} (n_prompts={n_prompts})")
    runs, summaries = [], []
    for arm, n in progress([(a, n) for a in arms for n in sizes], "arm x concurrency"):
        paired = paired_runs(EngineSpec(profile), [arm], requests, temperature=temperature, max_tokens=max_tokens,
                             repetitions=repetitions, concurrency=n, ignore_eos=True,
                             tags={"concurrency": n, "category": category, "vs": arm.label()})
        summaries.append(throughput_summary(paired).assign(vs=arm.label()))
        runs.append(paired)
    return pd.concat(runs, ignore_index=True), pd.concat(summaries, ignore_index=True)


def throughput_summary(runs: pd.DataFrame, baseline_arm: str = "baseline") -> pd.DataFrame:
    """Per (concurrency, arm) of one paired run: output tokens per second of all its requests, median TPOT,
    acceptance, and the throughput speedup over the baseline (``timing.speedup_interval`` over repetitions).

    For the speed model: ``step_ms``, the decode time per engine step (each request's decode time over its decode
    steps, median over requests), the same for the baseline it was paired with, tokens per decode step and the
    share of steps that proposed a draft; ``request_tau``, each request's tokens per decode step (median over
    repetitions), as a list in prompt order."""
    runs = runs.assign(decode_tokens=runs["output_tokens"] - 1)
    if "accepted" not in runs:  # rows from before per-request counters
        runs["accepted"] = float("nan")
    per_run = (runs.groupby(["concurrency", "arm", "repetition"], sort=False)
               .agg(tokens=("output_tokens", "sum"), wall_s=("run_wall_s", "first"), tpot_s=("tpot_s", "median"),
                    drafts=("run_drafts", "first"), draft_tokens=("run_draft_tokens", "first"),
                    accepted=("run_accepted", "first"), **{c: (c, "first") for c in META})
               .reset_index())
    per_run["tok_per_s"] = per_run["tokens"] / per_run["wall_s"]
    rows = []
    for (n, arm), group in per_run.groupby(["concurrency", "arm"], sort=False):
        base = per_run[(per_run["concurrency"] == n) & (per_run["arm"] == baseline_arm)].set_index("repetition")
        ratio = (group.set_index("repetition")["tok_per_s"] / base["tok_per_s"]).dropna()
        interval = speedup_interval(ratio.values)  # one cluster: the repetitions of this batch
        drafts, draft_tokens, accepted = group["drafts"].sum(), group["draft_tokens"].sum(), group["accepted"].sum()
        requests = runs[(runs["concurrency"] == n) & (runs["arm"] == arm)]
        base_requests = runs[(runs["concurrency"] == n) & (runs["arm"] == baseline_arm)]
        steps = requests["decode_tokens"].sum() - accepted
        steps_each = requests["verify_steps"] if "verify_steps" in requests else requests["decode_tokens"]
        tau = requests.assign(tau=requests["decode_tokens"] / steps_each).groupby("prompt_index")["tau"].median()
        rows.append({
            **{c: group.iloc[0][c] for c in META}, "concurrency": n, "arm": arm,
            "tok_per_s": float(group["tok_per_s"].median()), "tpot_ms": 1000 * float(group["tpot_s"].median()),
            "acceptance_rate": accepted / draft_tokens if draft_tokens else float("nan"),
            "mean_acceptance_length": 1 + accepted / drafts if drafts else float("nan"),
            "speedup": interval["speedup"], "speedup_ci_low": interval["low"], "speedup_ci_high": interval["high"],
            "interval": interval["interval"], "log_se": interval["log_se"],
            "prompts": requests["prompt_index"].nunique(),
            "prompt_tokens": float(requests["prompt_tokens"].median()),
            "output_tokens": float(requests["output_tokens"].mean()),
            "tokens_per_verify_step": requests["decode_tokens"].sum() / steps if drafts and steps > 0 else float("nan"),
            "draft_fraction": drafts / steps if drafts and steps > 0 else float("nan"),
            "step_ms": 1000 * float((requests["decode_s"] / steps_each.fillna(requests["decode_tokens"])).median()),
            "baseline_step_ms": 1000 * float((base_requests["decode_s"] / base_requests["decode_tokens"]).median()),
            "request_tau": [round(float(x), 4) for x in tau] if drafts else [],
        })
    return pd.DataFrame(rows)


def crossover(summary: pd.DataFrame, arm: str) -> int | None:
    """The smallest concurrency at which ``arm`` lost throughput with its whole interval below 1 (a loss the
    repetitions support, not a median that dipped under 1), or None if it never did."""
    below = summary[(summary["arm"] == arm) & (summary["speedup_ci_high"] < 1)]
    return int(below["concurrency"].min()) if len(below) else None


def k_schedule(loss_at: int | None, smallest: int, k: int) -> tuple[tuple[tuple[int, int, int], ...] | None, str]:
    """A ``k_per_batch_size`` schedule that drafts ``k`` tokens below the first losing batch size and none from
    there on; or None, with the reason, when no schedule can help."""
    if loss_at is None:
        return None, "the draft model did not lose at any measured concurrency: there is no loss to recover"
    if loss_at <= smallest:
        return None, (f"the draft model lost already at {loss_at} request(s): a batch-size schedule cannot help; "
                      "leave speculation off on this machine")
    schedule = ((1, loss_at - 1, k), (loss_at, OPEN_END, 0))
    return schedule, f"schedule {schedule}: k={k} below {loss_at} concurrent requests, no drafting from there"


def decode_breakdown(summary: pd.DataFrame) -> pd.DataFrame:
    """Per speculative arm and prompt length of :func:`long_context_sweep`'s summary: the baseline's prefill share,
    the end-to-end and decode-only speedups, acceptance, decode tokens per verify step, c_eff (a verify step costs
    ``1 + k * c_eff`` baseline decode steps at that length), the arm's TTFT over its baseline's and, where a
    ``draft_alone`` arm was measured, ``draft_c``: the draft's own TPOT over the target's at that length."""
    base = summary[summary["arm"] == "baseline"].set_index(["vs", "prompt_length"])
    alone = summary[summary["method"] == "draft_alone"].set_index("prompt_length")
    rows = []
    for _, arm in summary[~summary["method"].isin(["baseline", "draft_alone"])].iterrows():
        b = base.loc[(arm["vs"], arm["prompt_length"])]
        rows.append({
            "arm": arm["arm"], "method": arm["method"], "k": int(arm["k"]), "prompt_length": arm["prompt_length"],
            "prompt_tokens": arm["prompt_tokens"], "prefill_share": b["ttft_s"] / b["e2e_s"],
            "speedup": arm["speedup"], "decode_speedup": arm["decode_speedup"],
            "decode_ci_low": arm["decode_ci_low"], "decode_ci_high": arm["decode_ci_high"],
            "acceptance_rate": arm["acceptance_rate"], "tokens_per_verify_step": arm["tokens_per_verify_step"],
            "c_eff": arm["c_eff"], "ttft_over_baseline": arm["ttft_s"] / b["ttft_s"],
            "draft_c": 1 / alone.loc[arm["prompt_length"], "decode_speedup"]
            if arm["method"] == "draft_model" and arm["prompt_length"] in alone.index else float("nan"),
        })
    return pd.DataFrame(rows)


def decode_findings(breakdown: pd.DataFrame) -> list[str]:
    """Sentences computed from :func:`decode_breakdown`: per arm, where decode itself slowed down (the decode-only
    speedup's whole interval below 1) and by how much, where end to end lost while decode did not (then the extra
    prefill, the TTFT ratio, is what is left), and which of the two terms of decode speedup = tokens per decode
    step / cost of a decode step moved between the shortest and the longest prompt."""
    lines = []
    for arm, group in breakdown.groupby("arm", sort=False):
        group = group.sort_values("prompt_length")
        short, long = group.iloc[0], group.iloc[-1]
        for _, row in group.iterrows():
            if row.decode_ci_high < 1:
                lines.append(f"{arm} at {row.prompt_tokens:.0f} prompt tokens: decode itself slowed down, "
                             f"{row.decode_speedup:.2f}x [{row.decode_ci_low:.2f}, {row.decode_ci_high:.2f}]: each "
                             f"output token took {1 / row.decode_speedup - 1:.0%} longer than the baseline's.")
            elif row.speedup < 1 <= row.decode_ci_high and row.ttft_over_baseline > 1:
                lines.append(f"{arm} at {row.prompt_tokens:.0f} prompt tokens: end to end {row.speedup:.2f}x while "
                             f"decode alone was {row.decode_speedup:.2f}x [{row.decode_ci_low:.2f}, "
                             f"{row.decode_ci_high:.2f}]; its TTFT was {row.ttft_over_baseline:.2f}x the baseline's.")
        step = 1 + long.k * long.c_eff, 1 + short.k * short.c_eff
        lines.append(
            f"{arm}, {short.prompt_tokens:.0f} -> {long.prompt_tokens:.0f} prompt tokens: decode-only speedup "
            f"{short.decode_speedup:.2f}x -> {long.decode_speedup:.2f}x, end to end {short.speedup:.2f}x -> "
            f"{long.speedup:.2f}x. A decode step emitted {short.tokens_per_verify_step:.2f} -> "
            f"{long.tokens_per_verify_step:.2f} tokens (acceptance {short.acceptance_rate:.0%} -> "
            f"{long.acceptance_rate:.0%}) and cost {step[1]:.2f} -> {step[0]:.2f} baseline decode steps "
            f"(c_eff {short.c_eff:.2f} -> {long.c_eff:.2f}).")
        tokens_change = long.tokens_per_verify_step / short.tokens_per_verify_step
        cost_change = step[0] / step[1]
        if long.decode_speedup < short.decode_speedup and np.isfinite([tokens_change, cost_change]).all():
            cause = ("a decode step's cost grew faster than the baseline's step" if cost_change > 1 / tokens_change
                     else "fewer tokens were emitted per step")
            lines.append(f"  Decode speedup fell by {1 - long.decode_speedup / short.decode_speedup:.0%}: tokens per "
                         f"step x{tokens_change:.2f}, step cost x{cost_change:.2f}, so mostly because {cause}.")
        if long.method == "draft_model" and np.isfinite([short.draft_c, long.draft_c]).all():
            lines.append(f"  The draft served alone cost {short.draft_c:.2f} -> {long.draft_c:.2f} of a target decode "
                         "step at the same prompt length.")
        prefill = ("its draft prefills the prompt too" if long.method == "draft_model"
                   else "it has no draft model to prefill")
        lines.append(f"  TTFT over the baseline's: {group['ttft_over_baseline'].min():.2f}-"
                     f"{group['ttft_over_baseline'].max():.2f} ({prefill}).")
    return lines


def batching_headroom(summary: pd.DataFrame, vs: str) -> list[str]:
    """What batching alone did for the baseline in a :func:`batch_sweep` (rows paired with ``vs``): its throughput
    per concurrency and what a decode step on n sequences cost against a step on one (the TPOT ratio). Spare
    capacity at batch 1 is what speculation spends there; where batching fills the machine, draft tokens compete
    with real ones."""
    base = summary[(summary["arm"] == "baseline") & (summary["vs"] == vs)].sort_values("concurrency")
    single = base.iloc[0]
    lines = [f"The baseline alone: {single.tok_per_s:.1f} tok/s at {single.concurrency} request(s), TPOT "
             f"{single.tpot_ms:.1f} ms"]
    lines += [f"The baseline alone: {row.tok_per_s:.1f} tok/s at {row.concurrency} requests "
              f"(x{row.tok_per_s / single.tok_per_s:.2f}); a decode step on {row.concurrency} sequences took "
              f"{row.tpot_ms / single.tpot_ms:.2f}x a step on one (TPOT {row.tpot_ms:.1f} ms)"
              for row in base.iloc[1:].itertuples()]
    last = base.iloc[-1]
    cost = last.tpot_ms / single.tpot_ms
    lines.append(f"A decode step on {last.concurrency} sequences cost {cost:.2f}x a step on one: "
                 + (f"a single request left much of this machine's capacity unused ({last.concurrency} sequences "
                    "for less than half their separate cost), and speculation at batch 1 spends that spare capacity "
                    "on draft tokens." if cost <= last.concurrency / 2 else
                    "batching was far from free here, so there was little spare capacity for draft tokens even at "
                    "batch 1."))
    return lines
