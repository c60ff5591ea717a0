"""The decision checklist: answers about a workload -> a predicted speedup with an interval, a reason per answer,
and a verdict worded as a prediction. The checklist is the speed model (``helpers.speed_model``):

- acceptance: each prompt's tokens per decode step, measured by notebook 04 on every prompt of the workload's
  category (batched, per-request counters), at the nearest measured temperature; for long documents, 05's at the
  nearest measured prompt length;
- step and prefill costs: fitted by notebook 06 to the kit's own step times and TTFTs (and checked there on points
  it was not fitted on) when the pair asked is the pair measured; for another pair (a GPU profile's), a cost model
  of that GPU from the roofline (weights and KV bytes over bandwidth, flat until compute-bound), labelled
  "predicted from the roofline, not measured": the CPU's batch curve is never carried to a GPU verdict;
- one request: a latency speedup; several: a throughput speedup of that many requests at once;
- every input outside what was measured (prompt length, answer length, concurrency, temperature) is flagged
  "extrapolated";
- VRAM headroom: :func:`helpers.vram.budget` for the pair, the card and the context × concurrency asked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers import results, speed_model, vram

GAIN, LOSS = 1.05, 0.95  # without an interval (fewer than 3 prompts) a point estimate outside these is called
LONG_DOCUMENT = "long document (RAG)"  # the workload whose acceptance comes from 05's documents

# Cards for the roofline cost model: memory (GB), bandwidth (bytes/s), dense bfloat16 tensor rate (FLOP/s).
# RTX PRO 6000 Blackwell: 96 GB GDDR7 at 1,792 GB/s (NVIDIA); bf16 rate taken as its 4,000 TOPS (FP4, sparse)
# / 8, an assumption. H100 SXM: 80 GB HBM3 at 3.35 TB/s, 989 TFLOPS dense bf16 (NVIDIA datasheet).
GPUS = {"RTX PRO 6000 Blackwell (the talk's card class)": (96, 1.792e12, 5.0e14),
        "H100 SXM": (80, 3.35e12, 9.89e14)}
DEFAULT_GPU = next(iter(GPUS))


class NotMeasured(ValueError):
    """A method the kit has not measured for the answers (a workload, a pair): left out of the recommendation."""


@dataclass(frozen=True)
class Answers:
    workload: str  # a category measured in 04 ("structured", "creative") or LONG_DOCUMENT
    temperature: float
    prompt_tokens: int
    concurrency: int
    gpu_gb: float
    target_config: object  # anything helpers.vram.load_config accepts
    draft_config: object
    dtype: str = "bfloat16"
    output_tokens: int = 256
    utilization: float = 0.9
    gpu: str = DEFAULT_GPU  # the card of the roofline cost model, for a pair the kit did not measure
    measured_tau: dict | None = None  # method -> tokens per verify step measured on the user's own prompts (07)


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
    grid: pd.DataFrame  # 04 at one k: category, temperature, method, speedup with CIs, acceptance
    long_context: pd.DataFrame  # 05, baseline rows included
    batch: pd.DataFrame  # 06: method, concurrency, (throughput) speedup
    source: Source
    acceptance: pd.DataFrame | None = None  # 04 per prompt (helpers.sweeps.acceptance), at k
    costs: speed_model.Costs | None = None  # fitted by notebook 06
    k: int = 4

    def workloads(self) -> list[str]:
        found = sorted(set(self.acceptance["category"])) if self.acceptance is not None else []
        has_long = "request_tau" in self.long_context and self.long_context["request_tau"].map(_taus).map(len).any()
        return found + ([LONG_DOCUMENT] if has_long else [])

    def methods(self) -> list[str]:
        return sorted(set(self.acceptance["method"])) if self.acceptance is not None else []


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def stated_speedup(option: dict) -> str:
    """A predicted speedup with its 95% interval, or "(no interval)" where there is none (too few prompts)."""
    interval = (f" [{option['low']:.2f}, {option['high']:.2f}]" if option["low"] == option["low"]
                else " (no interval)")
    return f"{option['speedup']:.2f}x{interval}"


def _short(config: object) -> str:
    name = config.get("_name_or_path", "a config") if isinstance(config, dict) else str(config)
    return name.rstrip("/").split("/")[-1]


def _taus(value) -> list[float]:
    if isinstance(value, str):
        return [float(x) for x in value.strip("[]").split(",") if x.strip()]
    return list(value) if isinstance(value, (list, tuple, np.ndarray)) else []


def _measured_pair(answers: Answers, source: Source) -> bool:
    return (_short(answers.target_config).lower() == source.target.lower()
            and _short(answers.draft_config).lower() == source.draft.lower())


def _acceptance(answers: Answers, data: Measurements, method: str) -> tuple[pd.DataFrame, str, list[str]]:
    """Per-prompt acceptance for the answers, the reason naming it, and the flags for what was not measured."""
    flags = []
    if answers.measured_tau and method in answers.measured_tau:
        taus = list(answers.measured_tau[method])
        per_prompt = pd.DataFrame({"method": method, "k": data.k, "tau": taus, "prompt_tokens": answers.prompt_tokens,
                                   "output_tokens": answers.output_tokens, "drafted_steps": 1.0, "verify_steps": 1.0,
                                   "draft_tokens": float(data.k)})
        return per_prompt, (f"your prompts, measured: {np.mean(taus):.2f} tokens per verify step (the servers' own "
                            "counters, notebook 07)"), flags
    if answers.workload == LONG_DOCUMENT:
        rows = data.long_context[data.long_context["method"] == method]
        rows = rows[rows["request_tau"].map(_taus).map(len) > 0]
        if rows.empty:
            raise NotMeasured(f"{method}: not measured on long documents (05)")
        lengths = rows["prompt_tokens"].to_numpy(float)
        row = rows.iloc[int(np.argmin(np.abs(np.log(lengths) - np.log(answers.prompt_tokens))))]
        taus = _taus(row["request_tau"])
        per_prompt = pd.DataFrame({"method": method, "k": int(row["k"]), "tau": taus, "prompt_tokens": row["prompt_tokens"],
                                   "output_tokens": row["output_tokens"], "drafted_steps": row["draft_fraction"],
                                   "verify_steps": 1.0})
        if answers.temperature != 0:
            flags.append(f"extrapolated: temperature {answers.temperature:g}; long documents were measured at T = 0")
        return per_prompt, (f"{LONG_DOCUMENT}: {_count(len(taus), 'document')} of {row['prompt_tokens']:.0f} tokens (05, the "
                            f"measured length nearest {answers.prompt_tokens}), {np.mean(taus):.2f} tokens per decode "
                            f"step, acceptance {row['acceptance_rate']:.0%}"), flags
    if data.acceptance is None:
        raise ValueError("no per-prompt acceptance (04): run notebook 04")
    rows = data.acceptance[(data.acceptance["category"] == answers.workload) & (data.acceptance["method"] == method)]
    if rows.empty:
        raise NotMeasured(f"{method}: not measured on {answers.workload!r} prompts (04)")
    temps = np.array(sorted(rows["temperature"].unique()))
    nearest = float(temps[np.argmin(np.abs(temps - answers.temperature))])
    if nearest != answers.temperature:
        inside = temps.min() <= answers.temperature <= temps.max()
        flags.append(f"{'not measured' if inside else 'extrapolated'}: temperature {answers.temperature:g}; "
                     f"acceptance taken at the nearest measured, {nearest:g} (measured: "
                     + ", ".join(f"{t:g}" for t in temps) + ")")
    rows = rows[rows["temperature"] == nearest]
    rate = rows["accepted"].sum() / rows["draft_tokens"].sum() if rows["draft_tokens"].sum() else float("nan")
    return rows, (f"{answers.workload} at T = {nearest:g}: {_count(len(rows), 'prompt')}, {rows['tau'].mean():.2f} tokens per "
                  f"decode step on average, acceptance {rate:.0%} (04, every prompt of the category)"), flags


def _ranges(data: Measurements) -> dict[str, tuple[float, float]]:
    frames = [f for f in (data.grid, data.long_context, data.batch) if f is not None and len(f)]
    spec = pd.concat([f[~f["method"].isin(["baseline", "draft_alone"])] for f in frames], ignore_index=True)
    out = {}
    for column, name in (("prompt_tokens", "prompt tokens"), ("output_tokens", "answer tokens")):
        if column in spec and spec[column].notna().any():
            out[name] = (float(spec[column].min()), float(spec[column].max()))
    if "concurrency" in data.batch and len(data.batch):
        out["concurrent requests"] = (float(data.batch["concurrency"].min()), float(data.batch["concurrency"].max()))
    return out


def _extrapolated(answers: Answers, data: Measurements) -> list[str]:
    asked = {"prompt tokens": answers.prompt_tokens, "answer tokens": answers.output_tokens,
             "concurrent requests": answers.concurrency}
    return [f"extrapolated: {value:g} {name}, outside the measured {low:.0f}-{high:.0f}"
            for name, (low, high) in _ranges(data).items() if not low <= (value := asked[name]) <= high]


def roofline_costs(answers: Answers) -> speed_model.Costs:
    """Step and prefill costs of the asked pair on ``answers.gpu`` from the roofline: a step reads every weight and
    each sequence's KV cache once (bandwidth) or computes 2 x parameters FLOPs per token (tensor rate), whichever
    is slower; prefill is compute-bound. No launch or synchronisation cost: a floor, not a measurement."""
    _, bandwidth, flops = GPUS[answers.gpu]
    target = vram.model_memory(answers.target_config, answers.dtype)
    draft = vram.model_memory(answers.draft_config, answers.dtype)
    return speed_model.RooflineCosts(target, draft, bandwidth, flops, f"predicted from the roofline of the "
                                     f"{answers.gpu}, not measured")


def measured_point(answers: Answers, data: Measurements, method: str) -> pd.Series | None:
    """The kit's own measurement of these answers' conditions, where there is one: 04 (one request, the category
    and temperature, a prompt no longer than twice 04's), 05 (one request, long documents, within 25% of a measured
    length) or 06 (structured at T = 0, the same concurrency). Answer length is not matched."""
    if answers.concurrency == 1 and answers.workload != LONG_DOCUMENT:
        rows = data.grid[(data.grid["method"] == method) & (data.grid["category"] == answers.workload)
                         & np.isclose(data.grid["temperature"], answers.temperature)]
        if len(rows) and answers.prompt_tokens <= 2 * rows["prompt_tokens"].max():
            return pd.concat([rows.iloc[0], pd.Series({"measured_in": "04"})])
    if answers.concurrency == 1 and answers.workload == LONG_DOCUMENT:
        rows = data.long_context[data.long_context["method"] == method]
        near = rows[(rows["prompt_tokens"] - answers.prompt_tokens).abs() <= 0.25 * answers.prompt_tokens]
        if len(near):
            row = near.iloc[int((near["prompt_tokens"] - answers.prompt_tokens).abs().to_numpy().argmin())]
            return pd.concat([row, pd.Series({"measured_in": "05"})])
    if answers.concurrency > 1 and answers.workload == "structured" and answers.temperature == 0:
        rows = data.batch[(data.batch["method"] == method) & (data.batch["concurrency"] == answers.concurrency)]
        if len(rows):
            return pd.concat([rows.iloc[0], pd.Series({"measured_in": "06"})])
    return None


def predict_option(answers: Answers, data: Measurements, method: str, draws: int = 60) -> dict:
    """One method's predicted speedup for the answers, with its interval and reasons."""
    per_prompt, acceptance_reason, flags = _acceptance(answers, data, method)
    measured_pair = _measured_pair(answers, data.source)
    if measured_pair:
        if data.costs is None:
            raise ValueError("no speed model fitted (notebook 06)")
        costs, cost_reason = data.costs, f"step costs fitted to the kit's own step times ({data.source})"
    else:
        costs = roofline_costs(answers)
        cost_reason = (f"step costs {costs.label}: the acceptance above is the kit's pair's, not "
                       f"{_short(answers.target_config)} + {_short(answers.draft_config)}'s")
    if method not in costs.methods:
        raise NotMeasured(f"{method}: no step cost for it in the speed model ({costs.label})"
                          if measured_pair else f"{method}: the kit measured its own EAGLE-3 head only, not one "
                          f"for {_short(answers.target_config)}")
    if method in speed_model.ONE_REQUEST_ONLY and answers.concurrency > 1:
        flags.append(f"extrapolated: {method} at {answers.concurrency} concurrent requests; it was timed one "
                     "request at a time (04), and its per-step cost is taken not to grow with the batch")
    per_prompt = per_prompt.assign(method=method)
    prediction = speed_model.category_prediction(costs, per_prompt, n=answers.concurrency,
                                                 prompt_tokens=answers.prompt_tokens,
                                                 output_tokens=answers.output_tokens,
                                                 draws=costs.draws(draws) if measured_pair else [],
                                                 temperature=answers.temperature)
    ctx = answers.prompt_tokens + answers.output_tokens / 2
    f = speed_model.draft_share(method, data.k, per_prompt["verify_steps"].sum(), per_prompt["drafted_steps"].sum(),
                                per_prompt["draft_tokens"].sum() if "draft_tokens" in per_prompt else float("nan"))
    ratio = (costs.step_s(method, answers.concurrency, data.k, ctx, f, answers.temperature)
             / costs.step_s("baseline", answers.concurrency, data.k, ctx, temperature=answers.temperature))
    prefill = costs.ttft_s("baseline", answers.prompt_tokens)
    base = prefill + (answers.output_tokens - 1) * costs.step_s("baseline", 1, data.k, ctx,
                                                                 temperature=answers.temperature)
    quantity = "latency" if answers.concurrency == 1 else "throughput"
    reasons = [
        "acceptance: " + acceptance_reason,
        f"{cost_reason}: a {method} step at k = {data.k} costs {ratio:.2f} plain decode steps at "
        f"{answers.concurrency} concurrent sequence(s) and {ctx:.0f} tokens of context",
        f"prompt {answers.prompt_tokens} tokens, answer {answers.output_tokens} tokens: prefill is {prefill / base:.0%} "
        "of one request's baseline time, and speculation does not speed it up",
        f"predicted {stated_speedup(prediction)} {quantity} ({prediction['interval']})",
        *flags, *_extrapolated(answers, data),
    ]
    point = measured_point(answers, data, method) if measured_pair else None
    if point is not None:
        reasons.append(f"measured beside it ({point['measured_in']}, {point.get('interval', 'interval')}): "
                       f"{point['speedup']:.2f}x [{point['speedup_ci_low']:.2f}, {point['speedup_ci_high']:.2f}]")
    return {"method": method, "quantity": quantity, "speedup": prediction["speedup"], "low": prediction["low"],
            "high": prediction["high"], "reasons": reasons, "measured_pair": measured_pair, "measured": point,
            "extrapolated": [r for r in reasons if r.startswith(("extrapolated", "not measured"))]}


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
    elif method == "eagle3":
        reason = (f"fits with {with_draft['free'] / 1e9:.1f} GB free without the EAGLE-3 head's own weights and KV "
                  "cache (one layer: small beside the target's, not counted here)")
    else:
        reason = f"fits with {with_draft['free'] / 1e9:.1f} GB free; {method} adds no weights and no KV cache"
    return {"fits": bool(with_draft["fits"]), "reason": "VRAM: " + reason}


def recommend(answers: Answers, data: Measurements) -> dict:
    """Per measured method: the predicted latency (one request) or throughput (several) speedup with its interval,
    the VRAM fit and the reasons; and the verdict, worded as a prediction: "turn on" only when the best option's
    whole interval is above 1, "leave it off" when every option's is below 1, otherwise "no clear gain"."""
    if answers.workload not in data.workloads():
        raise ValueError(f"no measurement of {answers.workload!r}; measured: {', '.join(data.workloads())}")
    options, not_predicted = [], []
    for method in data.methods():
        try:
            prediction = predict_option(answers, data, method)
        except NotMeasured as missing:
            not_predicted.append(str(missing))
            continue
        memory = vram_check(answers, method)
        prediction["reasons"].append(memory["reason"])
        prediction["fits"] = memory["fits"]
        options.append(prediction)
    usable = [o for o in options if o["fits"]]
    best = max(usable, key=lambda o: o["speedup"]) if usable else None
    what = ("latency speedup of one request" if answers.concurrency == 1
            else f"throughput speedup at {answers.concurrency} concurrent requests")
    pair = f"{_short(answers.target_config)} + {_short(answers.draft_config)}"
    if best is not None and not best["measured_pair"]:
        where = (f" (costs from the roofline of the {answers.gpu}, not measured; acceptance measured on "
                 f"{data.source}, not on {pair})")
    else:
        where = f" (speedups predicted from measurements on {data.source})"

    if best is None:
        verdict = "leave it off: no speculative configuration fits in memory at this concurrency"
    elif best["low"] == best["low"]:
        if best["low"] > 1:
            verdict = f"turn on {best['method']}: predicted {stated_speedup(best)} {what}{where}"
        elif all(o["high"] < 1 for o in usable):
            verdict = f"leave it off: every option is predicted to lose; the best, {best['method']}, {stated_speedup(best)} {what}{where}"
        else:
            verdict = f"no clear gain: the best option ({best['method']}) is predicted at {stated_speedup(best)} {what}{where}"
    elif best["speedup"] >= GAIN:
        verdict = f"turn on {best['method']}: predicted {stated_speedup(best)} {what}{where}"
    elif best["speedup"] <= LOSS:
        verdict = f"leave it off: the best option ({best['method']}) is predicted at {stated_speedup(best)} {what}{where}"
    else:
        verdict = f"no clear gain: the best option ({best['method']}) is predicted at {stated_speedup(best)} {what}{where}"
    extrapolated = sorted({r for o in options for r in o["extrapolated"]})
    caveat = ("A prediction of the speed model (helpers.speed_model): measured acceptance over per-step costs, "
              "checked in notebook 06 on measurements it was not fitted on."
              + (" Outside what was measured: " + "; ".join(extrapolated) + "." if extrapolated else "")
              + (" Not predicted: " + "; ".join(not_predicted) + "." if not_predicted else ""))
    return {"verdict": verdict, "best": best, "options": options, "caveat": caveat, "source": str(data.source)}


def model_pairs(profile) -> dict[str, tuple[object, object, str]]:
    """(target config, draft config, dtype) per pair the checklist offers: the profile's own first (the pair its
    measurements are of), then the talk's pair and Qwen3 (roofline costs unless the profile measured them)."""
    own = f"{profile.name}: {profile.target.split('/')[-1]} + draft {profile.default_draft}"
    return {own: (profile.target, profile.draft(), profile.dtype),
            "Llama-3.1-8B + Llama-3.2-1B (the talk)": ("meta-llama/Llama-3.1-8B-Instruct",
                                                       "meta-llama/Llama-3.2-1B-Instruct", "bfloat16"),
            "Qwen3-8B + Qwen3-0.6B": ("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "bfloat16")}


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
    """This kit's measurements for the checklist: 04's and 05's results and 06's speed model from ``build/results/``
    (measured now, smaller, where a file is absent) and 06's ``batch``. Returns them and a note for each measurement
    made here."""
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.sweeps import category_grid, long_context_sweep

    notes = []
    grid, accepted = results.load("04_structured_vs_creative"), results.load("04_acceptance")
    if grid is None or accepted is None:
        points = [(c, t, m, profile.k) for c in ("structured", "creative") for t in (0.0, 1.0)
                  for m in ("draft_model", "ngram")]
        grid, accepted = category_grid(profile.name, points, n_prompts=1, max_tokens=max_tokens,
                                       repetitions=repetitions, acceptance_prompts=3)
        notes.append("04's results were absent: measured here, 1 timed prompt and 3 for acceptance per category, "
                     "T = 0 and 1")
    long = results.load("05_long_context")
    if long is None:
        arms = [EngineSpec(profile.name, m, k=profile.k) for m in ("draft_model", "ngram")]
        _, long = long_context_sweep(profile.name, arms, [128, 512], 1, max_tokens, repetitions)
        notes.append("05's results were absent: measured here at 128 and 512 prompt tokens")
    shutdown_engine()
    fitted = results.load(speed_model.MODEL_FILE)
    if fitted is None:
        batch_fit = batch[~batch["arm"].isin(exclude_arms)]
        costs = speed_model.fit(speed_model.points(grid, long, batch_fit), knee=speed_model.machine_knee(profile)[0])
        notes.append("no speed model in build/results/: fitted here to the measurements above")
    else:
        costs = speed_model.from_frame(fitted)
    return _assemble(grid, long, batch, profile.k, exclude_arms, accepted, costs), notes


def _assemble(grid: pd.DataFrame, long: pd.DataFrame, batch: pd.DataFrame, k: int, exclude_arms=(),
              acceptance: pd.DataFrame | None = None, costs: speed_model.Costs | None = None) -> Measurements:
    grid = grid[(grid["arm"] != "baseline") & (grid["k"] == k)]
    batch = batch[(batch["arm"] != "baseline") & ~batch["arm"].isin(exclude_arms) & (batch["method"] != "draft_alone")]
    if acceptance is not None:
        acceptance = acceptance[acceptance["k"] == k]
    return Measurements(grid, long, batch, source_of(grid, long, batch), acceptance, costs, k)


def reference_measurements(profile) -> Measurements | None:
    """The checklist's measurements from the reference results the kit ships for ``profile`` (04, 05, 06 in full
    mode, ``data/reference/<profile>/``, with 06's speed model), without the k-by-batch-size arm; None when the kit
    ships none."""
    names = ("04_structured_vs_creative", "05_long_context", "06_concurrency", "04_acceptance",
             speed_model.MODEL_FILE)
    frames = [results.load_reference(name, profile.name) for name in names]
    if any(frame is None for frame in frames):
        return None
    grid, long, batch, accepted, fitted = frames
    return _assemble(grid, long, batch, profile.k, tuple(a for a in batch["arm"].unique() if "by batch size" in a),
                     accepted, speed_model.from_frame(fitted))


SCENARIOS = {  # notebook 06's typical workloads (each at one request unless it says otherwise)
    "JSON API, one user": dict(workload="structured", temperature=0.0, prompt_tokens=64, output_tokens=64),
    "creative chat at T=1": dict(workload="creative", temperature=1.0, prompt_tokens=64, output_tokens=64),
    "RAG: long document, short answer": dict(workload=LONG_DOCUMENT, temperature=0.0, prompt_tokens=1900,
                                              output_tokens=48),
    "busy JSON server": dict(workload="structured", temperature=0.0, prompt_tokens=64, output_tokens=48,
                             concurrency=8),
}


def scenario_table(data: Measurements, pairs: dict[str, tuple[object, object, str]],
                   scenarios: dict[str, dict] = SCENARIOS, gpu_gb: float = 96) -> pd.DataFrame:
    """Per (pair, scenario): the verdict, each method's predicted speedup with its interval, and the kit's own
    measurement of the same conditions where there is one."""
    rows = []
    for pair_name, (target, draft, dtype) in pairs.items():
        for name, asked in scenarios.items():
            answers = Answers(**{"concurrency": 1, **asked}, gpu_gb=gpu_gb, target_config=target,
                              draft_config=draft, dtype=dtype)
            result = recommend(answers, data)
            beside = [f"{o['method']} {o['measured']['speedup']:.2f}x [{o['measured']['speedup_ci_low']:.2f}, "
                      f"{o['measured']['speedup_ci_high']:.2f}] ({o['measured']['measured_in']})"
                      for o in result["options"] if o["measured"] is not None]
            rows.append({"pair": pair_name, "scenario": name, "verdict": result["verdict"].split(" (")[0],
                         **{o["method"]: f"{o['speedup']:.2f}x [{o['low']:.2f}, {o['high']:.2f}]"
                            + ("" if o["fits"] else " (does not fit)") for o in result["options"]},
                         "measured beside it": "; ".join(beside)})
    return pd.DataFrame(rows).set_index(["pair", "scenario"])
