"""Notebook 07's logic: an attendee's workload measured on real vLLM servers, against the checklist's prediction.

The parts, in the order the notebook uses them:

* :func:`prepare` picks the prompts (pasted text, a file, or the kit's structured prompts) and checks them and the
  whole plan (methods, concurrencies, repetitions, deployment URLs, workload kind) before any server starts.
* :func:`checklist_data` and :func:`predictions`: notebook 06's checklist for this workload at each concurrency,
  from this machine's results of 04-06 (``build/results/``) or the kit's reference results.
* :func:`measure`: one server per method, all up together (``helpers.serving.Server``: started on 127.0.0.1,
  health-checked, always stopped; or ``Server.from_url`` for an existing deployment), ``vllm bench serve`` at
  each concurrency and repetition with the methods' runs interleaved, the server's ``/metrics`` speculation
  counters read before and after each run; one tidy row per run.
* :func:`speedups`, :func:`compare`, :func:`verdict_lines`: the measured speedup per concurrency (repetition i of
  a method paired with repetition i of the baseline, ``timing.speedup_interval`` and ``timing.verdict``) and the
  prediction's error. ``helpers.served_findings`` has the rest: agreement with notebooks 04 and 06, the ITL pitfall.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpers import bench, checklist, results, serving, speed_model
from helpers.metrics import SpecCounters
from helpers.profiles import Profile
from helpers.timing import short_name, speedup_interval, verdict
from helpers.workload_files import Workload, check_run_settings, prepare_workload, token_counter
from helpers.workloads import CATEGORIES, SUITE, prompts

METHODS = serving.SERVE_METHODS  # baseline, draft_model, ngram
BASELINE = "baseline"
KIT_PROMPTS = f"the kit's structured prompts ({SUITE.parent.parent.name}/{SUITE.parent.name}/{SUITE.name})"
RESULTS_NAME = "07_your_workload"
CHECKLIST_NOTEBOOKS = ("04_structured_vs_creative", "05_long_context", "06_concurrency", "04_acceptance",
                       "06_speed_model")  # the last: the speed model notebook 06 fitted
# Counter columns of a row: this module's own /metrics difference around the whole client run, under the
# kit's names; the client's own difference (after its warm-up, parse_bench's names) is kept with a bench_ prefix.
COUNTER_COLUMNS = ("drafts", "draft_tokens", "accepted_tokens", "acceptance_rate", "mean_acceptance_length",
                   "position_acceptance")


# --------------------------------------------------------------------------------------------- checking


def prompt_box(rows: int = 6):
    """A text area for pasted prompts (one per line); the notebook reads its ``.value`` in the next cell."""
    import ipywidgets as widgets

    return widgets.Textarea(value="", placeholder="Paste prompts here, one per line (leave empty to use the file "
                            "or the kit's prompts)", rows=rows, layout=widgets.Layout(width="100%"),
                            continuous_update=False)


def check_plan(methods: Sequence[str] | None = None, concurrencies: Sequence[int] = (1,), repetitions: int = 1,
               base_urls: Mapping[str, str] | None = None, workload_kind: str | None = None) -> tuple[str, ...]:
    """Raise ``ValueError`` for a plan that would fail or mean nothing; returns the methods to measure.

    ``methods`` defaults to ``base_urls``' keys when given (in the kit's order), else all of :data:`METHODS`.
    The baseline must be among them: every speedup is against it.
    """
    if base_urls is not None:
        if not isinstance(base_urls, Mapping) or not base_urls:
            raise ValueError(f"BASE_URLS must be None or a dict such as {{'baseline': 'http://host:8000', "
                             f"'draft_model': 'http://host:8001'}}, got {base_urls!r}")
        unknown = [m for m in base_urls if m not in METHODS]
        if unknown:
            raise ValueError(f"BASE_URLS names unknown methods {unknown}; use keys from {METHODS}")
        bad = {m: u for m, u in base_urls.items() if not isinstance(u, str) or not u.startswith(("http://", "https://"))}
        if bad:
            raise ValueError(f"BASE_URLS values must be URLs starting with http:// or https:// (the server's base URL, "
                             f"without /v1), got {bad}")
    if methods is None:
        methods = tuple(m for m in METHODS if base_urls is None or m in base_urls)
    methods = tuple(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"methods must be some of {METHODS}, got {list(methods)}")
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods {list(methods)} name one method twice")
    if BASELINE not in methods:
        raise ValueError(f"methods {list(methods)} lack 'baseline': every speedup is measured against it")
    if len(methods) < 2:
        raise ValueError("measure at least one speculative method beside the baseline ('draft_model', 'ngram')")
    if base_urls is not None:
        missing = [m for m in methods if m not in base_urls]
        if missing:
            raise ValueError(f"BASE_URLS has no URL for {missing}: give one per method, or leave them out of methods")
    if isinstance(concurrencies, int | str) or not len(concurrencies):
        raise ValueError(f"CONCURRENCIES must be a non-empty list of whole numbers >= 1, got {concurrencies!r}")
    for c in concurrencies:
        check_run_settings(c, 1, 0.0)  # concurrency must be a whole number >= 1
    if len(set(concurrencies)) != len(concurrencies):
        raise ValueError(f"CONCURRENCIES {list(concurrencies)} repeat a value")
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 1:
        raise ValueError(f"repetitions must be a whole number >= 1, got {repetitions!r}")
    if workload_kind is not None and workload_kind not in CATEGORIES:
        raise ValueError(f"WORKLOAD_KIND must be one of {CATEGORIES} (the categories the checklist measured in "
                         f"notebook 04), got {workload_kind!r}")
    return methods


@functools.cache
def _counter(tokenizer: str):
    return token_counter(tokenizer)


def prepare(path: str | Path | None = None, pasted: str | None = None, *, profile: Profile, max_tokens: int,
            temperature: float, concurrencies: Sequence[int], repetitions: int, num_prompts: int | None = None,
            methods: Sequence[str] | None = None, base_urls: Mapping[str, str] | None = None,
            workload_kind: str | None = None, request_rate: float = math.inf, text_mode: str = "lines",
            tokenizer: Any = None, max_model_len: int | None = None) -> Workload:
    """The checked workload, before any server starts; ``ValueError`` (or ``FileNotFoundError``) otherwise.

    Prompts come from ``pasted`` text when it is not None, else from the file at ``path``, else from the kit's
    structured prompts. ``num_prompts`` requests per run (default: one per prompt; more repeat prompts, fewer take
    the first ones). Prompt lengths are counted with ``tokenizer`` (default: the profile's target, as the server
    counts them) against ``max_model_len`` (default: the profile's; a deployment's own for ``helpers.decide``). ``concurrency`` of the result is the largest one asked.
    """
    check_plan(methods, concurrencies, repetitions, base_urls, workload_kind)
    if pasted is not None:
        source, label = pasted, "pasted text"
    elif path is not None and str(path).strip():
        source, label = Path(str(path).strip()).expanduser(), None
    else:
        source, label = prompts("structured"), KIT_PROMPTS
    counter = tokenizer if tokenizer is not None else profile.target
    counter = _counter(str(counter)) if isinstance(counter, str | Path) else counter
    workload = prepare_workload(source, max_model_len=max_model_len or profile.max_model_len, max_tokens=max_tokens,
                                concurrency=max(concurrencies), temperature=temperature, num_prompts=num_prompts,
                                tokenizer=counter, text_mode=text_mode, request_rate=request_rate)
    return replace(workload, source=label) if label else workload


def describe_workload(workload: Workload) -> str:
    """One line: how many prompts, from where, their token lengths, and the run settings."""
    counts = workload.prompt_tokens
    lengths = (f", {int(np.median(counts))} prompt tokens median ({min(counts)}-{max(counts)}, with the chat template)"
               if counts else "")
    return (f"{len(workload)} prompts from {workload.source}{lengths}; {workload.num_prompts} requests per run, "
            f"max_tokens {workload.max_tokens}, temperature {workload.temperature:g}")


def short_source(workload: Workload) -> str:
    """Where the prompts came from, short enough for a figure's footer: a file's name, not its path."""
    if workload.source == KIT_PROMPTS:
        return "the kit's structured prompts"
    return workload.source if workload.source in ("pasted text", "list") else Path(workload.source).name


# --------------------------------------------------------------------------------------------- the prediction


def checklist_data(profile: Profile) -> tuple[checklist.Measurements | None, str]:
    """The checklist's measurements and where they come from: this machine's results of notebooks 04-06 in
    ``build/results/`` (this mode, this profile, with 04's per-prompt acceptance and 06's speed model), else the
    kit's reference results for the profile, else None with the reason."""
    frames = [results.load(name) for name in CHECKLIST_NOTEBOOKS]
    if all(f is not None for f in frames):
        grid, long, batch, accepted, fitted = frames
        if all(set(f["profile"].dropna()) == {profile.name} for f in (grid, long, batch)):
            dynamic = tuple(a for a in batch["arm"].unique() if "by batch size" in str(a))
            data = checklist._assemble(grid, long, batch, profile.k, dynamic, accepted,
                                       speed_model.from_frame(fitted))
            if len(data.grid) and len(data.batch) and len(data.acceptance):
                return data, "this machine's results of notebooks 04-06 (build/results/)"
    reference = checklist.reference_measurements(profile)
    if reference is not None:
        return reference, results.reference_label(profile.name)
    return None, (f"no results of notebooks 04-06 for profile {profile.name!r} in build/results/ (with the speed "
                  "model) and no reference shipped for it: run notebooks 04-06 first for a prediction")


def predictions(data: checklist.Measurements, *, workload_kind: str, temperature: float, prompt_tokens: int,
                output_tokens: int, concurrencies: Sequence[int], target_config: object, draft_config: object,
                dtype: str = "bfloat16", gpu_gb: float | None = None,
                measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """``checklist.recommend`` at each concurrency: one row per (method, concurrency) with the predicted speedup,
    its quantity (latency at 1 request, throughput above), whether the pair fits ``gpu_gb`` (default: this card's
    memory; 96 GB, notebook 06's card, without CUDA) and the verdict. With ``measured`` (07's table), the
    acceptance is the user's own prompts' (:func:`measured_tau`), not the category's."""
    check_plan(None, concurrencies, 1, None, workload_kind)
    gpu_gb = gpu_gb if gpu_gb is not None else card_gb()
    tau = measured_tau(measured) if measured is not None else None
    rows = []
    for c in concurrencies:
        answers = checklist.Answers(workload=workload_kind, temperature=temperature, prompt_tokens=int(prompt_tokens),
                                    concurrency=int(c), gpu_gb=gpu_gb, target_config=target_config,
                                    draft_config=draft_config, dtype=dtype, output_tokens=int(output_tokens),
                                    measured_tau=tau)
        result = checklist.recommend(answers, data)
        for option in result["options"]:
            rows.append({"method": option["method"], "concurrency": int(c), "quantity": option["quantity"],
                         "predicted": option["speedup"], "low": option["low"], "high": option["high"], "fits": option["fits"], "verdict": result["verdict"],
                         "reasons": option["reasons"]})
    return pd.DataFrame(rows)


def measured_tau(table: pd.DataFrame) -> dict[str, list[float]]:
    """Per speculative method: tokens per verify step on the user's own prompts, from the servers' counters at the
    lowest concurrency, one value per repetition (1 + accepted draft tokens per draft)."""
    spec = table[(table["method"] != BASELINE) & (table["drafts"] > 0)]
    spec = spec[spec["concurrency"] == spec["concurrency"].min()]
    return {method: (1 + group["accepted_tokens"] / group["drafts"]).round(4).tolist()
            for method, group in spec.groupby("method")}


def card_gb(default: float = 96.0) -> float:
    """This GPU's memory in GB, or ``default`` without CUDA (the VRAM check is then about that card, not this CPU)."""
    from helpers.profiles import cuda_available

    if not cuda_available():
        return default
    import torch

    return torch.cuda.get_device_properties(0).total_memory / 1e9


# --------------------------------------------------------------------------------------------- the measurement


def counter_columns(before: SpecCounters | None, after: SpecCounters | None) -> dict[str, Any]:
    """The speculation counters of one run (``after - before``) as row columns; NaN where the server has none."""
    if after is None:
        return {c: (float("nan") if c != "position_acceptance" else []) for c in COUNTER_COLUMNS}
    run = after - (before or SpecCounters())
    values = run.as_dict()
    return {c: values[c] for c in COUNTER_COLUMNS}


def labels(profile: Profile, method: str, base_url: str | None = None) -> dict[str, Any]:
    """hardware, profile, target, draft, method, k, arm of a row, as the kit's other rows; for a deployment
    (``base_url``) the hardware is the URL and the target and draft are filled from the result."""
    if base_url is not None:
        return {"hardware": f"deployment at {base_url}", "profile": profile.name, "target": None,
                "draft": "(the deployment's)" if method != BASELINE else "", "method": method, "k": float("nan"),
                "arm": method}
    from helpers.engines import EngineSpec
    from helpers.timing import describe_spec

    return describe_spec(EngineSpec(profile.name, method, k=profile.k))


def measure_point(server: serving.Server, workload: Workload, concurrency: int, repetition: int,
                  row_labels: dict[str, Any], result_dir: Path, request_rate: float = math.inf,
                  **bench_options: Any) -> dict[str, Any]:
    """One ``vllm bench serve`` run at ``concurrency`` with the server's counters read before and after it."""
    point = replace(workload, concurrency=concurrency, num_prompts=max(workload.num_prompts, concurrency))
    before = serving.spec_counters(server.base_url)
    path = bench.bench_workload(server, point, dataset_path=result_dir / "dataset.jsonl", result_dir=result_dir,
                                request_rate=request_rate, label=f"{row_labels['method']}-r{repetition}",
                                **bench_options)
    after = serving.spec_counters(server.base_url)
    result = bench.parse_bench(path)
    for column in COUNTER_COLUMNS:
        result[f"bench_{column}"] = result.pop(column)
    row = {**row_labels, **result, "method": row_labels["method"], "concurrency": concurrency,
           "repetition": repetition, "temperature": workload.temperature, "max_tokens": workload.max_tokens,
           "source": workload.source, **counter_columns(before, after)}
    if row.get("target") is None:
        row["target"] = short_name(str(result.get("model") or "unknown"))
    row["tokens_per_request"] = row["output_tokens"] / row["completed"] if row.get("completed") else float("nan")
    return row


def measure(profile: Profile, workload: Workload, methods: Sequence[str] | None = None,
            concurrencies: Sequence[int] = (1,), repetitions: int = 1, base_urls: Mapping[str, str] | None = None,
            result_dir: str | Path | None = None, request_rate: float = math.inf, port: int = serving.DEFAULT_PORT,
            progress: bool = True, server_options: dict[str, Any] | None = None,
            **bench_options: Any) -> pd.DataFrame:
    """Every method's server up together, the runs interleaved: one tidy row per run.

    For each repetition and concurrency the methods take turns, their order rotating with the repetition (as the
    offline ``timing.paired_runs``), so a drift of the machine lands on every method alike instead of on the ratio
    of two servers measured one after the other. Only one server works at a time: an idle server took about 2% of
    one core here (0.4 s of CPU in 20 s, the cpu profile's draft-model server).

    Without ``base_urls`` the servers are started here together on 127.0.0.1, ports ``port``,
    ``port + 1``, ..., with the profile's k and default draft, and all stopped at the end, also on an error or an
    interrupted cell; with ``base_urls`` the deployment's servers are health-checked first and never started or
    stopped. ``server_options`` go to ``serving.Server`` (e.g. ``tensor_parallel_size``), ``bench_options`` to
    ``bench.run_bench``. One benchmark client process serves all runs; only each server's first run sends
    warm-up requests (``num_warmups``, default 1).
    """
    methods = check_plan(methods, concurrencies, repetitions, base_urls)
    check_run_settings(max(concurrencies), workload.max_tokens, workload.temperature, workload.num_prompts,
                       request_rate)
    result_dir = Path(result_dir or serving.BUILD / "bench" / RESULTS_NAME)
    result_dir.mkdir(parents=True, exist_ok=True)
    if base_urls is not None:  # every deployment answers before anything is measured
        servers = {m: serving.Server.from_url(base_urls[m]) for m in methods}
    else:  # every command is built and checked, and every port is free, before the first server starts
        servers = {m: serving.Server(profile, m, k=profile.k, port=port + i, exclusive=False, **(server_options or {}))
                   for i, m in enumerate(methods)}
        for i in range(len(methods)):
            serving.check_port_free(port + i)
    row_labels = {m: labels(profile, m, s.base_url if base_urls is not None else None) for m, s in servers.items()}
    total = len(methods) * repetitions * len(concurrencies)
    bar = _progress(total) if progress else None
    warmups = bench_options.pop("num_warmups", 1)
    warm: set[str] = set()
    rows = []
    try:
        with contextlib.ExitStack() as stack:
            if base_urls is None:  # launched together, their start-ups overlap; nothing is measured before all are up
                serving.start_together(*servers.values())
            for server in servers.values():
                stack.enter_context(server)  # stopped, all, at the end of the block
            client = stack.enter_context(bench.BenchClient())
            for repetition in range(repetitions):
                order = methods[repetition % len(methods):] + methods[:repetition % len(methods)]
                for c in concurrencies:
                    for method in order:
                        if bar is not None:
                            bar.set_postfix_str(f"{method}, repetition {repetition + 1}, concurrency {c}")
                        rows.append({**measure_point(servers[method], workload, c, repetition, row_labels[method],
                                                     result_dir, request_rate, client=client,
                                                     num_warmups=0 if method in warm else warmups, **bench_options),
                                     "repetitions": repetitions})
                        warm.add(method)  # later runs find this server warm
                        if bar is not None:
                            bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        measure.partial = pd.DataFrame(rows)  # what was measured before an error or an interrupt
    return pd.DataFrame(rows)


def _progress(total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="bench runs", unit="run")


# --------------------------------------------------------------------------------------------- the verdict


def _pooled(group: pd.DataFrame) -> tuple[float, float]:
    """Acceptance rate and mean acceptance length over all runs of ``group`` (counts summed, then divided)."""
    if "draft_tokens" not in group:
        return float("nan"), float("nan")
    drafts, draft_tokens, accepted = (pd.to_numeric(group[c], errors="coerce").sum()
                                      for c in ("drafts", "draft_tokens", "accepted_tokens"))
    return (accepted / draft_tokens if draft_tokens else float("nan"),
            1 + accepted / drafts if drafts else float("nan"))


def speedups(table: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Per speculative method and concurrency: output-throughput speedup over the baseline.

    Repetition i of the method is paired with repetition i of the baseline at the same concurrency; estimate and
    interval come from ``timing.speedup_interval`` (below 5 pairs: the median and the range, labelled so in
    ``interval``), the verdict from ``timing.verdict``. ``e2el_speedup`` pairs the median end-to-end latencies the
    same way (the median of the ratios). Also the medians over repetitions of both throughputs, TTFT, TPOT and ITL,
    and the pooled acceptance.
    """
    base = table[table["method"] == baseline]
    if base.empty:
        raise ValueError(f"no {baseline!r} rows: every speedup is against the baseline")
    rows = []
    for (method, c), group in table[table["method"] != baseline].groupby(["method", "concurrency"], sort=False):
        b = base[base["concurrency"] == c].set_index("repetition")
        arm = group.set_index("repetition")
        ratio = (arm["output_throughput"] / b["output_throughput"]).dropna()
        interval = speedup_interval(ratio.to_numpy())
        # each pair is one run over the whole prompt set, not one prompt: say so instead of "for these 1 prompt(s)"
        interval["interval"] = interval["interval"].replace("for these 1 prompt(s)", "for this prompt set")
        acceptance, length = _pooled(group)
        row = {"method": method, "concurrency": c, "repetitions": int(group["repetition"].nunique()),
               "pairs": len(ratio), "tok_per_s": float(arm["output_throughput"].median()),
               "baseline_tok_per_s": float(b["output_throughput"].median()) if len(b) else float("nan"),
               "speedup": interval["speedup"], "speedup_ci_low": interval["low"],
               "speedup_ci_high": interval["high"], "interval": interval["interval"],
               "e2el_speedup": float((b["median_e2el_ms"] / arm["median_e2el_ms"]).dropna().median()),
               "median_ttft_ms": float(arm["median_ttft_ms"].median()),
               "median_tpot_ms": float(arm["median_tpot_ms"].median()),
               "median_itl_ms": float(arm["median_itl_ms"].median()),
               "acceptance_rate": acceptance, "mean_acceptance_length": length,
               "tokens_per_request": float(arm["tokens_per_request"].median()) if "tokens_per_request" in arm
               else float("nan")}
        row["verdict"] = verdict(row)
        rows.append(row)
    return pd.DataFrame(rows)


def compare(measured: pd.DataFrame, predicted: pd.DataFrame, from_yours: pd.DataFrame | None = None) -> pd.DataFrame:
    """The measured speedups beside the checklist's prediction: ``error`` = measured / predicted - 1, and
    ``inside`` whether the prediction lies within the measured interval (or range). ``from_yours``: the prediction
    again from the user's own measured acceptance (``predictions(..., measured=table)``), as ``predicted_from_yours``
    with its interval."""
    keep = ["method", "concurrency", "quantity", "predicted", "fits"]
    merged = measured.merge(predicted[keep], on=["method", "concurrency"], how="left")
    if from_yours is not None:
        yours = from_yours[["method", "concurrency", "predicted", "low", "high"]].rename(columns={
            "predicted": "predicted_from_yours", "low": "yours_low", "high": "yours_high"})
        merged = merged.merge(yours, on=["method", "concurrency"], how="left")
    merged["error"] = merged["speedup"] / merged["predicted"] - 1
    merged["inside"] = (merged["speedup_ci_low"] <= merged["predicted"]) & (merged["predicted"] <= merged["speedup_ci_high"])
    return merged


def direction(low: float, high: float) -> str:
    """'paid' (the whole interval above 1), 'lost' (the whole interval below 1) or 'unclear' (it holds 1)."""
    if low > 1:
        return "paid"
    if high < 1:
        return "lost"
    return "unclear"


def _said(direction_: str) -> str:
    return {"paid": "it paid (the whole interval above 1)", "lost": "it lost (the whole interval below 1)",
            "unclear": "no clear effect (the interval holds 1)"}[direction_]


def verdict_lines(compared: pd.DataFrame) -> list[str]:
    """One sentence per (method, concurrency): measured speedup, its interval and kind, verdict, and the prediction."""
    lines = []
    for row in compared.sort_values(["method", "concurrency"]).itertuples():
        line = (f"{row.method} at concurrency {row.concurrency}: {row.speedup:.2f}x output throughput "
                f"[{row.speedup_ci_low:.2f}, {row.speedup_ci_high:.2f}] ({row.interval}): "
                f"{_said(direction(row.speedup_ci_low, row.speedup_ci_high))}; verdict: {row.verdict}")
        if "predicted" in compared and row.predicted == row.predicted:
            inside = "inside" if row.inside else "outside"
            line += (f". Checklist: {row.predicted:.2f}x {row.quantity} ({inside} the measured interval; "
                     f"measured / predicted - 1 = {row.error:+.0%})")
        lines.append(line)
    return lines
