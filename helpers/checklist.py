"""The decision checklist: answers about a workload -> a predicted speedup with a reason per answer.

What is measured (notebooks 04-06, saved under ``build/results/``):
- workload and temperature: each method's end-to-end and decode-only speedup at batch 1 on short prompts (04);
- prompt length: time to first token and time per output token with and without each method, and its decode-only
  speedup, at each measured prompt length, one request at a time (05);
- concurrency: each method's throughput speedup with N requests at once, structured prompts at T=0 (06);
- VRAM headroom: :func:`helpers.vram.budget` for the pair, the card and the context × concurrency asked.

What is assumed (each reason and the caveat say so):
- one request at a time, the answer is a latency speedup: latency = TTFT + (output tokens - 1) × TPOT at the
  prompt length (05), the speculative TPOT being the baseline's divided by D = 04's decode-only speedup for the
  workload × 05's decode-only speedup at that length / 05's at its shortest. That prefill and decode add this way
  and that 05's change with length carries over to every workload is assumed;
- with more than one request, the answer is a throughput speedup: 06's at that concurrency × 04's speedup for the
  workload over 04's for structured prompts at T=0. That the workload changes throughput as it changes latency at
  batch 1 is assumed; prompt and answer length are not modelled there;
- outside the measured prompt lengths or concurrencies the values are held at the nearest measured one
  ("extrapolated");
- the speedups are those of the measured profile's pair and hardware; the verdict names them, and says so when
  the pair asked about for the VRAM check is another one.
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
class Source:
    """Where the speedups were measured: profile, hardware, target and draft (short names, as in the rows)."""
    profile: str
    hardware: str
    target: str
    draft: str

    def __str__(self) -> str:
        return f"the {self.profile} profile: {self.target} + {self.draft}, {self.hardware}"


@dataclass(frozen=True)
class Measurements:
    grid: pd.DataFrame  # 04 at one k: category, temperature, method, speedup and decode_speedup with CIs, acceptance
    long_context: pd.DataFrame  # 05, baseline rows included: arm, vs, method, prompt_length, ttft_s, tpot_ms, decode_speedup
    batch: pd.DataFrame  # 06: method, concurrency, (throughput) speedup
    source: Source


def _short(config: object) -> str:
    name = config.get("_name_or_path", "a config") if isinstance(config, dict) else str(config)
    return name.rstrip("/").split("/")[-1]


def _grid_point(data: Measurements, workload: str, temperature: float, method: str) -> pd.Series:
    grid = data.grid[(data.grid["method"] == method) & (data.grid["category"] == workload)]
    if grid.empty:
        raise ValueError(f"no measurement of {method} on {workload!r} prompts")
    grid = grid[(grid["temperature"] - temperature).abs() == (grid["temperature"] - temperature).abs().min()]
    if len(grid) > 1:
        raise ValueError(f"{len(grid)} rows for {method} on {workload!r}; keep one k per method")
    return grid.iloc[0]


def _at(curve: pd.Series, value: float, log: bool = False) -> float:
    """``curve`` (indexed by the measured x) at ``value``, linear (in log x if ``log``) and flat outside."""
    xs = curve.index.to_numpy(float)
    if log:
        xs, value = np.log(xs), np.log(value)
    return float(np.interp(value, xs, curve.to_numpy(float)))


def _span(measured, value: float, unit: str) -> str:
    low, high = min(measured), max(measured)
    if low <= value <= high:
        return f"measured {low:g}-{high:g} {unit}"
    nearest = low if value < low else high
    return f"extrapolated: outside the measured {low:g}-{high:g} {unit}, held at the value measured at {nearest:g} {unit}"


def latency(answers: Answers, data: Measurements, method: str) -> dict:
    """Predicted latency speedup of one request (concurrency 1): prefill and decode at the prompt length (05),
    decode sped up by the workload's decode-only speedup (04) scaled by 05's change with length."""
    point = _grid_point(data, answers.workload, answers.temperature, method)
    arm = data.long_context[data.long_context["method"] == method]
    base = data.long_context[(data.long_context["arm"] == "baseline") & data.long_context["vs"].isin(arm["vs"])]
    if arm.empty or base.empty:
        raise ValueError(f"no long-context measurement of {method} with its baseline (05)")
    p, n = answers.prompt_tokens, answers.output_tokens - 1

    def at(frame: pd.DataFrame, column: str) -> float:
        return _at(frame.groupby("prompt_length")[column].median(), p)

    ttft_base, tpot_base, ttft_spec = 1000 * at(base, "ttft_s"), at(base, "tpot_ms"), 1000 * at(arm, "ttft_s")
    decode_05 = arm.groupby("prompt_length")["decode_speedup"].median()
    d04, d05 = float(point["decode_speedup"]), at(arm, "decode_speedup")
    d = d04 * d05 / decode_05.iloc[0]
    baseline, speculative = ttft_base + n * tpot_base, ttft_spec + n * tpot_base / d
    reasons = [
        f"{answers.workload} at temperature {point['temperature']:g} (nearest measured), one request, short prompts: "
        f"decode-only {d04:.2f}x [{point['decode_ci_low']:.2f}, {point['decode_ci_high']:.2f}], end-to-end "
        f"{point['speedup']:.2f}x, draft acceptance {point['acceptance_rate']:.0%} (04)",
        f"prompt of {p} tokens (05, {_span(decode_05.index, p, 'tokens')}): time to first token "
        f"{ttft_base / 1000:.2f} s without, {ttft_spec / 1000:.2f} s with {method} (prefill is not sped up); "
        f"decode-only {d05:.2f}x against {decode_05.iloc[0]:.2f}x at {decode_05.index[0]:g} tokens, so decode "
        f"speedup D = {d04:.2f} × {d05:.2f} / {decode_05.iloc[0]:.2f} = {d:.2f}",
        f"answer of {answers.output_tokens} tokens: TTFT + {n} × TPOT = {baseline / 1000:.2f} s without "
        f"(TPOT {tpot_base:.1f} ms, prefill {ttft_base / baseline:.0%} of it), {speculative / 1000:.2f} s with "
        f"(TPOT {tpot_base / d:.1f} ms): latency speedup {baseline / speculative:.2f}x",
    ]
    return {"method": method, "quantity": "latency", "speedup": baseline / speculative, "reasons": reasons}


def throughput(answers: Answers, data: Measurements, method: str) -> dict:
    """Predicted throughput speedup at ``answers.concurrency`` requests: 06's (structured, T=0), times 04's speedup
    for the workload over 04's for structured prompts at T=0 (an assumption)."""
    point = _grid_point(data, answers.workload, answers.temperature, method)
    reference = _grid_point(data, "structured", 0.0, method)
    batch = data.batch[data.batch["method"] == method]
    if batch.empty:
        raise ValueError(f"no throughput measurement of {method} (06)")
    curve = batch.groupby("concurrency")["speedup"].median()
    measured = _at(curve, answers.concurrency, log=True)
    ratio = float(point["speedup"]) / float(reference["speedup"])
    reasons = [
        f"{answers.concurrency} concurrent requests: throughput {measured:.2f}x on structured prompts at T=0 "
        f"(06, {_span(curve.index, answers.concurrency, 'requests')}; drafts compete with real tokens for compute)",
        f"{answers.workload} at temperature {point['temperature']:g}: "
        + ("the workload 06 measured, no scaling" if point.name == reference.name else
           f"× {point['speedup']:.2f}x / {reference['speedup']:.2f}x = {ratio:.2f}, 04's batch-1 speedup for it over "
           f"structured at T={reference['temperature']:g} (assumed: the workload changes throughput as it changes "
           "latency at batch 1)") + "; prompt and answer length are not modelled at this concurrency",
    ]
    return {"method": method, "quantity": "throughput", "speedup": measured * ratio, "reasons": reasons}


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
    """Per measured method: predicted latency (one request) or throughput (several) speedup, VRAM fit and reasons;
    and the overall verdict, which names the quantity and where the speedups were measured."""
    predict = latency if answers.concurrency == 1 else throughput
    options = []
    for method in sorted(set(data.grid["method"])):
        prediction = predict(answers, data, method)
        memory = vram_check(answers, method)
        prediction["reasons"].append(memory["reason"])
        prediction["fits"] = memory["fits"]
        options.append(prediction)
    usable = [o for o in options if o["fits"]]
    best = max(usable, key=lambda o: o["speedup"]) if usable else None
    what = ("latency speedup of one request" if answers.concurrency == 1
            else f"throughput speedup at {answers.concurrency} concurrent requests")
    source = data.source
    pair = f"{_short(answers.target_config)} + {_short(answers.draft_config)}"
    measured_pair = (_short(answers.target_config).lower() == source.target.lower()
                     and _short(answers.draft_config).lower() == source.draft.lower())
    where = f" (speedups measured on {source}{'' if measured_pair else f'; not on {pair}'})"
    if best is None:
        verdict = "leave it off: no speculative configuration fits in memory at this concurrency"
    elif best["speedup"] >= GAIN:
        verdict = f"turn on {best['method']}: predicted {best['speedup']:.2f}x {what}{where}"
    elif best["speedup"] <= LOSS:
        verdict = f"leave it off: the best option ({best['method']}) is predicted at {best['speedup']:.2f}x {what}{where}"
    else:
        verdict = f"no clear gain: the best option ({best['method']}) is predicted at {best['speedup']:.2f}x {what}{where}"
    caveat = ("Latency: prefill and decode times measured at the prompt length (05), decode sped up by the "
              "workload's decode-only speedup (04) scaled by 05's change with length; that they combine so is "
              "assumed, not measured." if answers.concurrency == 1 else
              "Throughput: measured on structured prompts at T=0 (06) and scaled to the workload by 04's batch-1 "
              "ratio; that scaling is assumed, not measured.")
    return {"verdict": verdict, "best": best, "options": options, "caveat": caveat, "source": str(source)}


def model_pairs(profile) -> dict[str, tuple[object, object, str]]:
    """(target config, draft config, dtype) for the VRAM check: the talk's pair, Qwen3, and a local profile's own."""
    pairs = {"Llama-3.1-8B + Llama-3.2-1B (the talk)": ("meta-llama/Llama-3.1-8B-Instruct",
                                                          "meta-llama/Llama-3.2-1B-Instruct", "bfloat16"),
             "Qwen3-8B + Qwen3-0.6B": ("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "bfloat16")}
    if profile.is_local:
        pairs[f"{profile.name}: {profile.target.split('/')[-1]} + draft {profile.default_draft}"] = (
            profile.target, profile.draft(), profile.dtype)
    return pairs


def source_of(*frames: pd.DataFrame) -> Source:
    """The profile, hardware, target and draft named in the rows of ``frames`` (distinct values joined by " / ")."""
    rows = pd.concat([f[f["method"] != "draft_alone"] for f in frames], ignore_index=True)

    def named(column: str, where: pd.DataFrame = rows) -> str:
        values = sorted({str(v) for v in where[column].dropna()}) if column in where else []
        return " / ".join(values) or "unknown"

    return Source(named("profile"), named("hardware"), named("target"),
                  named("draft", rows[rows["method"] == "draft_model"]))


def measurements(profile, batch: pd.DataFrame, max_tokens: int, repetitions: int,
                 exclude_arms: tuple[str, ...] = ()) -> tuple[Measurements, list[str]]:
    """This kit's measurements for the checklist: 04's and 05's results from ``build/results/`` (measured now,
    smaller, where a file is absent or predates decode-only speedups) and 06's ``batch``; 04 at the profile's k,
    speculative arms only; 05 with its baseline rows. Returns them and a note for each measurement made here."""
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.sweeps import category_grid, long_context_sweep

    notes = []
    grid = results.load("04_structured_vs_creative")
    if grid is None or "decode_speedup" not in grid:
        points = [(c, t, m, profile.k) for c in ("structured", "creative") for t in (0.0, 1.0)
                  for m in ("draft_model", "ngram")]
        grid = category_grid(profile.name, points, n_prompts=1, max_tokens=max_tokens, repetitions=repetitions,
                             acceptance_prompts=1)[0]
        notes.append("04's results were absent or without decode-only speedups: measured here, 1 prompt per "
                     "category, T = 0 and 1")
    long = results.load("05_long_context")
    if long is None or "decode_speedup" not in long:
        arms = [EngineSpec(profile.name, m, k=profile.k) for m in ("draft_model", "ngram")]
        _, long = long_context_sweep(profile.name, arms, [128, 512], 1, max_tokens, repetitions)
        notes.append("05's results were absent or without decode-only speedups: measured here at 128 and 512 "
                     "prompt tokens")
    shutdown_engine()
    return _assemble(grid, long, batch, profile.k, exclude_arms), notes


def _assemble(grid: pd.DataFrame, long: pd.DataFrame, batch: pd.DataFrame, k: int,
              exclude_arms=()) -> Measurements:
    grid = grid[(grid["arm"] != "baseline") & (grid["k"] == k)]
    batch = batch[(batch["arm"] != "baseline") & ~batch["arm"].isin(exclude_arms)]
    return Measurements(grid, long, batch, source_of(grid, long, batch))


def reference_measurements(profile) -> Measurements | None:
    """The checklist's measurements from the reference results the kit ships for ``profile`` (04, 05, 06 in full
    mode, ``data/reference/<profile>/``), without the k-by-batch-size arm; None when the kit ships none."""
    frames = [results.load_reference(name, profile.name)
              for name in ("04_structured_vs_creative", "05_long_context", "06_concurrency")]
    if any(frame is None for frame in frames):
        return None
    grid, long, batch = frames
    return _assemble(grid, long, batch, profile.k, tuple(a for a in batch["arm"].unique() if "by batch size" in a))
