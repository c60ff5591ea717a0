"""The kit's measurement sweeps, shared by the notebooks that show them and the checklist that reuses them.

Each sweep is a loop of :func:`helpers.timing.paired_runs` (paired, interleaved, warm-up excluded) and
returns tidy rows; every row carries hardware, profile, models, method, k, temperature and repetitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import cycle, islice

import pandas as pd

from helpers.engines import EngineSpec, get_engine
from helpers.timing import paired_runs, speedup_interval, summarize
from helpers.workloads import long_context_prompt, prompts

GridPoint = tuple[str, float, str, int]  # category, temperature, method, k
META = ("hardware", "profile", "target", "draft", "method", "k", "temperature", "repetitions")


def category_grid(profile: str, points: Sequence[GridPoint], n_prompts: int, max_tokens: int,
                  repetitions: int) -> pd.DataFrame:
    """One summary row per (category, temperature, method, k): the arm against the baseline, one request at a time."""
    summaries = []
    for category, temperature, method, k in points:
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
    for arm in arms:
        for length in lengths:
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
    for arm in arms:
        for n in sizes:
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
    """The smallest concurrency at which ``arm``'s median throughput speedup is below 1, or None if it never is."""
    below = summary[(summary["arm"] == arm) & (summary["speedup"] < 1)]
    return int(below["concurrency"].min()) if len(below) else None


def k_schedule(loss_at: int | None, smallest: int, k: int) -> tuple[tuple[tuple[int, int, int], ...] | None, str]:
    """A ``k_per_batch_size`` schedule that drafts ``k`` tokens below the first losing batch size and none from
    there on; or None, with the reason, when no schedule can help."""
    if loss_at is None:
        return None, "the draft model did not lose at any measured concurrency: there is no loss to recover"
    if loss_at <= smallest:
        return None, (f"the draft model lost already at {loss_at} request(s): a batch-size schedule cannot help; "
                      "leave speculation off on this machine")
    schedule = ((1, loss_at - 1, k), (loss_at, 1 << 16, 0))
    return schedule, f"schedule {schedule}: k={k} below {loss_at} concurrent requests, no drafting from there"
