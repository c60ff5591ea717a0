"""The kit's measurement sweeps, shared by the notebooks that show them and the checklist that reuses them.

Each sweep is a loop of :func:`helpers.timing.paired_runs` (paired, interleaved, warm-up excluded) and
returns tidy rows; every row carries hardware, profile, models, method, k, temperature and repetitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import cycle, islice

import numpy as np
import pandas as pd

from helpers.engines import OPEN_END, EngineSpec, get_engine
from helpers.timing import paired_runs, speedup_interval, summarize
from helpers.workloads import long_context_prompt, prompts

GridPoint = tuple[str, float, str, int]  # category, temperature, method, k


def progress(items: Sequence, what: str, unit: str = "point"):
    """``items`` with a progress bar: items done out of the total and the elapsed time (a widget in JupyterLab)."""
    from tqdm.auto import tqdm

    return tqdm(items, desc=what, unit=unit)


META = ("hardware", "profile", "target", "draft", "method", "k", "temperature", "repetitions")


def category_grid(profile: str, points: Sequence[GridPoint], n_prompts: int, max_tokens: int,
                  repetitions: int) -> pd.DataFrame:
    """One summary row per (category, temperature, method, k): the arm against the baseline, one request at a time."""
    summaries = []
    for category, temperature, method, k in progress(points, "04 grid points"):
        runs = paired_runs(EngineSpec(profile), [EngineSpec(profile, method, k=k)], prompts(category, n_prompts),
                           temperature=temperature, max_tokens=max_tokens, repetitions=repetitions,
                           tags={"category": category})
        summaries.append(summarize(runs).query("arm != 'baseline'").assign(category=category))
    return pd.concat(summaries, ignore_index=True)


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
        summary = summarize(paired).merge(medians, left_on="arm", right_index=True)
        summaries.append(summary.assign(prompt_length=length, vs=arm.label()))
        runs.append(paired)
    return pd.concat(runs, ignore_index=True), pd.concat(summaries, ignore_index=True)


def batch_sweep(profile: str, arms: Sequence[EngineSpec], sizes: Sequence[int], max_tokens: int, repetitions: int,
                category: str = "structured", temperature: float = 0.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Baseline against each of ``arms`` with ``n`` requests submitted at once, for each ``n`` in ``sizes``.

    The requests cycle through the category's prompts; ``ignore_eos`` makes every request write
    ``max_tokens``. Returns the per-request rows and :func:`throughput_summary` per (arm, size).
    """
    runs, summaries = [], []
    for arm, n in progress([(a, n) for a in arms for n in sizes], "arm x concurrency"):
        batch = list(islice(cycle(prompts(category)), n))
        paired = paired_runs(EngineSpec(profile), [arm], batch, temperature=temperature, max_tokens=max_tokens,
                             repetitions=repetitions, batch=True, ignore_eos=True,
                             tags={"concurrency": n, "category": category, "vs": arm.label()})
        summaries.append(throughput_summary(paired).assign(vs=arm.label()))
        runs.append(paired)
    return pd.concat(runs, ignore_index=True), pd.concat(summaries, ignore_index=True)


def throughput_summary(runs: pd.DataFrame, baseline_arm: str = "baseline") -> pd.DataFrame:
    """Per (concurrency, arm) of one paired run: output tokens per second of the whole batch, median TPOT,
    acceptance, and the throughput speedup over the baseline (``timing.speedup_interval`` over repetitions)."""
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
        rows.append({
            **{c: group.iloc[0][c] for c in META}, "concurrency": n, "arm": arm,
            "tok_per_s": float(group["tok_per_s"].median()), "tpot_ms": 1000 * float(group["tpot_s"].median()),
            "acceptance_rate": accepted / draft_tokens if draft_tokens else float("nan"),
            "mean_acceptance_length": 1 + accepted / drafts if drafts else float("nan"),
            "speedup": interval["speedup"], "speedup_ci_low": interval["low"], "speedup_ci_high": interval["high"],
            "interval": interval["interval"],
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
