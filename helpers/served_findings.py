"""Notebook 07's findings beyond the verdict: whether the served direction agrees with notebooks 04 and 06 (and
what differs when it does not), the engine layouts measured offline, the ITL pitfall on served data, and a check
of the client's counters against the server's."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import pandas as pd

from helpers import checklist, results
from helpers.served import BASELINE, KIT_PROMPTS, _pooled, _said, direction


def _nearest(values: Sequence[float], value: float) -> float:
    """The value nearest ``value`` in log scale; of two equally near, the larger."""
    return min(sorted(values, reverse=True), key=lambda v: abs(math.log(v) - math.log(value)))


def agreement(measured: pd.DataFrame, data: checklist.Measurements | None, workload_kind: str,
              temperature: float, table: pd.DataFrame | None = None) -> list[str]:
    """Computed sentences: at the lowest concurrency, did each method pay, as notebook 04 measured for this workload
    kind and temperature (one request at a time)? At the highest, did it stop paying, as 06 measured there? Where
    the direction differs, the differences between the two measurements that the numbers show."""
    lines = []
    if data is None:
        return ["No results of notebooks 04 and 06 to compare the direction with."]
    for method, group in measured.groupby("method", sort=False):
        group = group.sort_values("concurrency")
        low, high = group.iloc[0], group.iloc[-1]
        low_dir = direction(low.speedup_ci_low, low.speedup_ci_high)
        grid = data.grid[(data.grid["method"] == method) & (data.grid["category"] == workload_kind)]
        if low.concurrency != 1:
            lines.append(f"{method}: the lowest concurrency measured is {low.concurrency}, not 1: no comparison "
                         "with notebook 04 (one request at a time).")
        elif grid.empty:
            lines.append(f"{method}: notebook 04 has no {workload_kind!r} point for it.")
        else:
            point = grid.loc[(grid["temperature"] - temperature).abs().idxmin()]
            ref_dir = direction(point.speedup_ci_low, point.speedup_ci_high)
            same = (low_dir == "paid") == (ref_dir == "paid")
            lines.append(
                f"{method} at 1 request: served {low.speedup:.2f}x [{low.speedup_ci_low:.2f}, "
                f"{low.speedup_ci_high:.2f}], {_said(low_dir)}; notebook 04 ({workload_kind}, T={point.temperature:g}, "
                f"offline engine): {point.speedup:.2f}x [{point.speedup_ci_low:.2f}, {point.speedup_ci_high:.2f}], "
                f"{_said(ref_dir)}. " + ("Same direction." if same else "The direction differs:"))
            if not same:
                lines += ["  " + s for s in _differences_04(low, point, table)]
        batch = data.batch[data.batch["method"] == method]
        if high.concurrency == low.concurrency:
            continue
        if batch.empty:
            lines.append(f"{method}: notebook 06 has no throughput measurement for it.")
            continue
        at = _nearest(batch["concurrency"].unique(), high.concurrency)
        ref = batch[batch["concurrency"] == at].iloc[0]
        ref_dir = direction(ref.speedup_ci_low, ref.speedup_ci_high)
        high_dir = direction(high.speedup_ci_low, high.speedup_ci_high)
        same = (high_dir == "paid") == (ref_dir == "paid")
        where = "the same concurrency" if at == high.concurrency else f"the measured concurrency nearest {high.concurrency}"
        lines.append(
            f"{method} at {high.concurrency} requests: served {high.speedup:.2f}x [{high.speedup_ci_low:.2f}, "
            f"{high.speedup_ci_high:.2f}], {_said(high_dir)}; notebook 06 at {at} ({where}; structured, T=0): "
            f"{ref.speedup:.2f}x [{ref.speedup_ci_low:.2f}, {ref.speedup_ci_high:.2f}], {_said(ref_dir)}. "
            + ("Same direction." if same else "The direction differs:"))
        if not same:
            lines += ["  " + s for s in _differences_06(high, low, table)]
    return lines


def _differences_04(row, point, table: pd.DataFrame | None) -> list[str]:
    out = []
    if row.acceptance_rate == row.acceptance_rate and point.acceptance_rate == point.acceptance_rate:
        out.append(f"acceptance here {row.acceptance_rate:.0%}, in 04 {point.acceptance_rate:.0%}: "
                   + ("the prompts or settings differ in how predictable they are" if
                      abs(row.acceptance_rate - point.acceptance_rate) > 0.05 else "about the same, so the cost side differs"))
    out.append(f"the served speedup is output throughput over whole runs (TTFT, HTTP and streaming included; "
               f"end-to-end latency ratio here {row.e2el_speedup:.2f}x); 04's is end-to-end time per token of the "
               "offline engine, without a server")
    if table is not None and len(table):
        source, tokens = table["source"].iloc[0], row.tokens_per_request
        if source != KIT_PROMPTS:
            out.append(f"the prompts are {source}, not 04's")
        if tokens == tokens:
            out.append(f"requests wrote {tokens:.0f} tokens on average (max_tokens {int(table['max_tokens'].iloc[0])})")
    if table is not None and len(table) and str(table.get("hardware", pd.Series(["CPU"])).iloc[0]).startswith("CPU"):
        layouts = engine_layouts(str(table["profile"].iloc[0])) if "profile" in table else None
        out += layout_lines(layouts) if layouts is not None else [
            f"on a CPU the server's processes share this machine's {os.cpu_count()} cores with the engine"]
    return out


LAYOUTS = ("in-process", "one-core", "multiprocess")


def engine_layouts(profile: str) -> pd.DataFrame | None:
    """The reference measurement of ``scripts/engine_layouts.py`` for ``profile``, or None where there is none."""
    path = results.REFERENCE / f"engine_layouts-{profile}.csv"
    return pd.read_csv(path).set_index("layout") if path.exists() else None


def layout_lines(layouts: pd.DataFrame) -> list[str]:
    """What the same offline measurement gave in vLLM's engine layouts (``scripts/engine_layouts.py``), as sentences."""
    first = layouts.iloc[0]
    rows = [layouts.loc[name] for name in LAYOUTS]
    even = (first.tokens_per_verify_step - 1) / first.k  # c_eff at which tokens per step / (1 + k c_eff) = 1
    ratios = ", ".join(f"{name} {r.speedup:.2f}x [{r.speedup_ci_low:.2f}, {r.speedup_ci_high:.2f}]"
                       for name, r in zip(LAYOUTS, rows))
    overlap = max(r.speedup_ci_low for r in rows) < min(r.speedup_ci_high for r in rows)
    return [
        "the server runs vLLM's multiprocess engine (an EngineCore and a Worker process); on the CPU vLLM binds the "
        "worker's OpenMP threads to the cores it does not keep back for the other processes "
        "(vllm/utils/ompmultiprocessing.py, OMPProcessManager: one core kept per worker on x86); on the 2-core "
        "reference machine the model ran on one (the Worker's Cpus_allowed_list 0, OMP_NUM_THREADS=1), where 04's "
        "in-process engines use both",
        f"the same offline paired measurement ({first.arm} against the baseline, {first.prompts} structured prompts, "
        f"{first.max_tokens} tokens, T=0, {first.repetitions} repetitions; reference: {first.hardware}, {first.date}) "
        f"in three layouts: {ratios}; acceptance {first.acceptance_rate:.0%} and {first.tokens_per_verify_step:.2f} "
        f"tokens per verify step in each; c_eff (a verify step's cost in baseline steps per draft token) "
        + " -> ".join(f"{r.c_eff:.2f}" for r in rows) + "; baseline TPOT "
        + " -> ".join(f"{r.baseline_tpot_ms:.0f}" for r in rows) + " ms"
        + (": the intervals overlap, so at this size the layout's effect is not told apart from the spread between "
           "runs" if overlap else ""),
        f"a verify step emitting {first.tokens_per_verify_step:.2f} tokens breaks even at c_eff = "
        f"({first.tokens_per_verify_step:.2f} - 1) / {first.k} = {even:.2f} (theory: speedup = tokens per step / "
        f"(1 + k c_eff)): " + "; ".join(f"{name} {'below' if r.c_eff < even else 'above'} it" for name, r in
                                         zip(LAYOUTS, rows)),
    ]


def _differences_06(high, low, table: pd.DataFrame | None) -> list[str]:
    out = ["06 submitted its n requests at once, each writing exactly max_tokens (ignore_eos), in one offline call; "
           f"here {high.concurrency} requests stay in flight and each stops at its end of sequence"]
    if high.baseline_tok_per_s == high.baseline_tok_per_s and low.baseline_tok_per_s == low.baseline_tok_per_s:
        gain = high.baseline_tok_per_s / low.baseline_tok_per_s
        out.append(f"the served baseline's throughput rose x{gain:.2f} from {low.concurrency} to {high.concurrency} "
                   "concurrent requests: " + ("batching filled capacity that one request left idle, the capacity "
                                              "speculation spends at one request" if gain >= 2 else
                                              "the machine was already busy with one request, with little spare "
                                              "capacity for draft tokens at any concurrency"))
    if high.acceptance_rate == high.acceptance_rate:
        out.append(f"acceptance here {high.acceptance_rate:.0%} at {high.concurrency} requests "
                   f"(against {low.acceptance_rate:.0%} at {low.concurrency})")
    if table is not None and len(table):
        runs = table[(table["concurrency"] == high.concurrency)]
        if "num_prompts" in runs and len(runs):
            out.append(f"{int(runs['num_prompts'].iloc[0])} requests per run at that concurrency: a short run "
                       "spends a larger share of its time filling and draining the batch")
    return out


# --------------------------------------------------------------------------------------------- the ITL pitfall


def itl_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per method and concurrency (baseline included): median over repetitions of the runs' median TPOT and median
    ITL, their ratio, and the pooled mean acceptance length (tokens per verify step)."""
    rows = []
    for (method, c), group in table.groupby(["method", "concurrency"], sort=False):
        tpot, itl = float(group["median_tpot_ms"].median()), float(group["median_itl_ms"].median())
        rows.append({"method": method, "concurrency": c, "median_tpot_ms": tpot, "median_itl_ms": itl,
                     "itl_over_tpot": itl / tpot if tpot else float("nan"),
                     "mean_acceptance_length": _pooled(group)[1]})
    return pd.DataFrame(rows)


def itl_sentences(itl: pd.DataFrame, concurrency: int | None = None, baseline: str = BASELINE) -> list[str]:
    """At ``concurrency`` (default: the lowest): what per-event ITL says about each speculative method against its
    TPOT and against the baseline, computed from :func:`itl_table`."""
    concurrency = concurrency if concurrency is not None else int(itl["concurrency"].min())
    at = itl[itl["concurrency"] == concurrency].set_index("method")
    if baseline not in at.index:
        return [f"no baseline run at concurrency {concurrency}"]
    base = at.loc[baseline]
    lines = [f"baseline at concurrency {concurrency}: median ITL {base.median_itl_ms:.1f} ms, TPOT "
             f"{base.median_tpot_ms:.1f} ms (ratio {base.itl_over_tpot:.2f}"
             + (": about one token per streamed event)" if 0.8 <= base.itl_over_tpot <= 1.25 else ")")]
    for method, row in at.drop(index=baseline).iterrows():
        by_itl, by_tpot = row.median_itl_ms / base.median_itl_ms, base.median_tpot_ms / row.median_tpot_ms
        itl_word = f"{by_itl:.2f}x the baseline's gap: it looks {'slower' if by_itl > 1 else 'faster'}"
        tpot_word = f"{by_tpot:.2f}x faster" if by_tpot >= 1 else f"{1 / by_tpot:.2f}x slower"
        lines.append(
            f"{method}: median ITL {row.median_itl_ms:.1f} ms is {row.itl_over_tpot:.2f}x its TPOT "
            f"{row.median_tpot_ms:.1f} ms (mean acceptance length {row.mean_acceptance_length:.2f}: a streamed event "
            f"carries the tokens of one verify step). Judged by ITL, {itl_word}; per token (TPOT) it is "
            f"{tpot_word} than the baseline.")
    return lines


def counter_check(table: pd.DataFrame) -> list[str]:
    """The counters read here around each client run beside the client's own (after its warm-up request, sent in each
    server's first run only): ours count that request too, so they hold at least as many drafts."""
    spec = table[table["method"] != BASELINE]
    if "bench_drafts" not in spec or spec.empty:
        return []
    ours, client = pd.to_numeric(spec["drafts"], errors="coerce"), pd.to_numeric(spec["bench_drafts"], errors="coerce")
    both = ours.notna() & client.notna()
    if not both.any():
        return ["the benchmark client reported no speculation counters of its own"]
    extra = (ours[both] - client[both])
    return [f"drafts counted around each client run minus the client's own count (its warm-up, first run only): "
            f"{int(extra.min())} to {int(extra.max())} per run over {int(both.sum())} runs"
            + ("" if (extra >= 0).all() else "; negative somewhere: another client used the server meanwhile?")]
