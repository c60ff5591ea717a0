"""The decision checklist: answers about a workload -> a predicted speedup with a reason per answer.

Every factor comes from a measurement of this kit (notebooks 04-06, saved under ``build/results/``):
- workload and temperature: the measured speedup of each method at batch 1 on short prompts (04);
- prompt length: the measured end-to-end speedup at that length over the one at the shortest length (05);
- concurrency: the measured throughput speedup at that batch size over the one at batch 1 (06);
- VRAM headroom: :func:`helpers.vram.budget` for the pair, the card and the context × concurrency asked.
The factors are multiplied; that they combine independently is an assumption of this checklist, not a
measurement, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers import results, vram

GAIN, LOSS = 1.05, 0.95  # a predicted speedup outside [LOSS, GAIN] counts as a gain or a loss


@dataclass(frozen=True)
class Answers:
    workload: str  # a category measured in 04: "structured" or "creative"
    temperature: float
    prompt_tokens: int
    concurrency: int
    gpu_gb: float
    target_config: object  # anything helpers.vram.load_config accepts
    draft_config: object
    dtype: str = "bfloat16"
    output_tokens: int = 256
    utilization: float = 0.9


@dataclass(frozen=True)
class Measurements:
    grid: pd.DataFrame  # 04 at one k: category, temperature, method, speedup, CI, acceptance_rate
    long_context: pd.DataFrame  # 05: method, prompt_length, speedup
    batch: pd.DataFrame  # 06: method, concurrency, speedup


def _nearest(frame: pd.DataFrame, column: str, value: float) -> pd.DataFrame:
    nearest = frame.loc[(frame[column] - value).abs().idxmin(), column]
    return frame[frame[column] == nearest]


def _relative(frame: pd.DataFrame, column: str, value: float, log: bool = False) -> tuple[float, float, float]:
    """Speedup interpolated at ``value`` over the one at the smallest measured ``column``; and both speedups."""
    curve = frame.groupby(column)["speedup"].median().sort_index()
    xs = np.log(curve.index.to_numpy(float)) if log else curve.index.to_numpy(float)
    at = float(np.interp(np.log(value) if log else value, xs, curve.to_numpy()))
    return at / curve.iloc[0], at, float(curve.iloc[0])


def method_prediction(answers: Answers, data: Measurements, method: str) -> dict:
    """Predicted speedup of ``method`` for ``answers`` and the reason behind each factor."""
    grid = data.grid[(data.grid["method"] == method) & (data.grid["category"] == answers.workload)]
    if grid.empty:
        raise ValueError(f"no measurement of {method} on {answers.workload!r} prompts")
    grid = _nearest(grid, "temperature", answers.temperature)
    if len(grid) > 1:
        raise ValueError(f"{len(grid)} rows for {method} on {answers.workload!r}; keep one k per method")
    point = grid.iloc[0]
    base = float(point["speedup"])
    reasons = [f"{answers.workload} at temperature {point['temperature']:g} (nearest measured): "
               f"{base:.2f}x [{point['speedup_ci_low']:.2f}, {point['speedup_ci_high']:.2f}] at batch 1, "
               f"draft acceptance {point['acceptance_rate']:.0%} (04)"]
    factors = [base]
    long = data.long_context[data.long_context["method"] == method]
    if len(long):
        factor, at, short = _relative(long, "prompt_length", answers.prompt_tokens)
        factors.append(factor)
        reasons.append(f"prompt of {answers.prompt_tokens} tokens: end-to-end {at:.2f}x against {short:.2f}x at "
                       f"{long['prompt_length'].min()} tokens, factor {factor:.2f} (05; prefill is not sped up)")
    batch = data.batch[data.batch["method"] == method]
    if len(batch):
        factor, at, single = _relative(batch, "concurrency", answers.concurrency, log=True)
        factors.append(factor)
        reasons.append(f"{answers.concurrency} concurrent requests: throughput {at:.2f}x against {single:.2f}x "
                       f"alone, factor {factor:.2f} (06; drafts compete with real tokens for compute)")
    return {"method": method, "speedup": float(np.prod(factors)), "reasons": reasons}


def vram_check(answers: Answers, method: str) -> dict:
    """Whether the pair (or the target alone, for n-gram) fits the card at the asked context and concurrency."""
    draft = answers.draft_config if method == "draft_model" else None
    context = answers.prompt_tokens + answers.output_tokens
    gpu_bytes = answers.gpu_gb * 1e9
    with_draft = vram.budget(answers.target_config, draft, gpu_bytes, context, answers.concurrency,
                             answers.dtype, answers.utilization)
    alone = vram.budget(answers.target_config, None, gpu_bytes, context, answers.concurrency, answers.dtype,
                        answers.utilization)
    if not with_draft["fits"]:
        reason = (f"does not fit: {answers.concurrency} × {context} tokens need more than the "
                  f"{with_draft['usable'] / 1e9:.1f} GB usable; at most {with_draft['max_batch']} sequences fit "
                  f"with {'the draft' if draft else 'the target alone'}")
    elif draft is not None:
        reason = (f"fits with {with_draft['free'] / 1e9:.1f} GB free; the draft's weights and KV cost "
                  f"{alone['max_batch'] - with_draft['max_batch']} of {alone['max_batch']} sequences of capacity")
    else:
        reason = f"fits with {with_draft['free'] / 1e9:.1f} GB free; n-gram adds no weights and no KV cache"
    return {"fits": bool(with_draft["fits"]), "reason": "VRAM: " + reason}


def recommend(answers: Answers, data: Measurements) -> dict:
    """Per measured method: predicted speedup, VRAM fit and reasons; and the overall verdict."""
    options = []
    for method in sorted(set(data.grid["method"])):
        prediction = method_prediction(answers, data, method)
        memory = vram_check(answers, method)
        prediction["reasons"].append(memory["reason"])
        prediction["fits"] = memory["fits"]
        options.append(prediction)
    usable = [o for o in options if o["fits"]]
    best = max(usable, key=lambda o: o["speedup"]) if usable else None
    if best is None:
        verdict = "leave it off: no speculative configuration fits in memory at this concurrency"
    elif best["speedup"] >= GAIN:
        verdict = f"turn on {best['method']}: predicted {best['speedup']:.2f}x"
    elif best["speedup"] <= LOSS:
        verdict = f"leave it off: the best option ({best['method']}) is predicted at {best['speedup']:.2f}x"
    else:
        verdict = f"no clear gain: the best option ({best['method']}) is predicted at {best['speedup']:.2f}x"
    return {"verdict": verdict, "best": best, "options": options,
            "caveat": "Factors measured separately and multiplied; their independence is assumed, not measured."}


def model_pairs(profile) -> dict[str, tuple[object, object, str]]:
    """(target config, draft config, dtype) for the VRAM check: the talk's pair, Qwen3, and a local profile's own."""
    pairs = {"Llama-3.1-8B + Llama-3.2-1B (the talk)": ("meta-llama/Llama-3.1-8B-Instruct",
                                                          "meta-llama/Llama-3.2-1B-Instruct", "bfloat16"),
             "Qwen3-8B + Qwen3-0.6B": ("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "bfloat16")}
    if profile.is_local:
        pairs[f"{profile.name}: {profile.target.split('/')[-1]} + draft {profile.default_draft}"] = (
            profile.target, profile.draft(), profile.dtype)
    return pairs


def measurements(profile, batch: pd.DataFrame, max_tokens: int, repetitions: int,
                 exclude_arms: tuple[str, ...] = ()) -> tuple[Measurements, list[str]]:
    """This kit's measurements for the checklist: 04's and 05's results from ``build/results/`` (measured now,
    smaller, where a file is absent) and 06's ``batch``; speculative arms only, 04 at the profile's k.
    Returns them and a note for each measurement that had to be made here."""
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.sweeps import category_grid, long_context_sweep

    notes = []
    grid = results.load("04_structured_vs_creative")
    if grid is None:
        points = [(c, t, m, profile.k) for c in ("structured", "creative") for t in (0.0, 1.0)
                  for m in ("draft_model", "ngram")]
        grid = category_grid(profile.name, points, n_prompts=1, max_tokens=max_tokens, repetitions=repetitions)
        notes.append("04's results were absent: measured here, 1 prompt per category, T = 0 and 1")
    long = results.load("05_long_context")
    if long is None:
        arms = [EngineSpec(profile.name, m, k=profile.k) for m in ("draft_model", "ngram")]
        _, long = long_context_sweep(profile.name, arms, [128, 512], 1, max_tokens, repetitions)
        notes.append("05's results were absent: measured here at 128 and 512 prompt tokens")
    shutdown_engine()
    data = Measurements(
        grid=grid[(grid["arm"] != "baseline") & (grid["k"] == profile.k)],
        long_context=long[long["arm"] != "baseline"],
        batch=batch[(batch["arm"] != "baseline") & ~batch["arm"].isin(exclude_arms)],
    )
    return data, notes
