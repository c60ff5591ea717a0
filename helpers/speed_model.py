"""A speed model of speculative decoding, fitted to the kit's own measurements (notebooks 04, 05 and 06).

A request that writes L tokens takes L - 1 decode steps without speculation and (L - 1) / tau with it, tau being
its tokens per decode step (1 + the draft tokens it accepted per step, measured by vLLM per request). What a step
costs grows with what it computes, each added token costing less than the one before (:func:`_rising`):

    t_T(N, ctx) = a_T + b_T M + h_T (sqrt(M) - 1) + e_T N ctx    the target scoring N tokens in one pass, each
                                                                 after ctx tokens
    t_D(N, ctx) = a_D + b_D M + h_D (sqrt(M) - 1) + e_D N ctx    the draft model, the same (measured serving the
                                                                 draft alone)
    M = max(N, knee) - knee + 1: no more than one token's cost up to the knee, the tokens vLLM-CPU's matmul kernels
    score at one token's cost on this CPU (timed on the target's shapes, :func:`gemm_knee`; 1 where the cost grows
    from the first token)
    draft-model step, n sequences:  t_T(n (k + 1), ctx) + k (t_D(n, ctx) + x_D) + o_D
    n-gram step, n sequences:       t_T(n, ctx) + f (t_T(n (k + 1), ctx) - t_T(n, ctx)) + o_N
    EAGLE-3 step, n sequences:      t_T(n (k + 1), ctx) + k x_E
    suffix step, n sequences:       t_T(n (1 + f k), ctx) + o_S

At T > 0 every step also samples: a plain step adds z_B n, a speculative step z_S n, because vLLM runs its
rejection sampler on every step of a speculative engine, drafted or not (``use_spec_decode`` in
``v1/worker/gpu_model_runner.py``: 2.7-3.2 ms a step here against 0.6-0.9 ms at T = 0). z_B and z_S are not fitted:
a 2 ms term in a 50-100 ms step is below what timed end-to-end points resolve (the 2026-12-06 reference fitted z_S =
0 +- 9 ms), so they are measured in-engine, T = 1 against T = 0, by a spy on the sampler (``scripts/step_breakdown.py``,
:data:`SAMPLER_MEASUREMENT`, :func:`sampler_costs`).

(f: the share of steps that proposed a draft; n-gram proposes none where it finds no match; suffix decoding drafts
a varying number of tokens, so its f is the draft tokens per step over k, :func:`draft_share`). An EAGLE-3 head is
one small layer over the target's own hidden states: x_E is what one of its draft passes costs, measured one
request at a time only (04), so its growth with the number of sequences is not modelled. Divided by a plain
decode step t_T(n, ctx), a step costs R = 1 + k c_draft(n) + verify(n, k) + overhead(n): the draft's k passes, the
target scoring k + 1 tokens per sequence instead of 1, and the engine's own per-step work (:func:`cost_terms`).
Prefill: TTFT(P) = q0 + q1 P + q2 P^2 for P prompt tokens in one step; a draft model adds u0 + u1 P (it prefills
too), n-gram u_N.

Both parts are fitted by least squares on relative errors to the step times and TTFTs of the *fit* split
(:func:`in_fit`, fixed before fitting); their covariance gives the model's own uncertainty. Every other measured
point is held out: :func:`held_out` predicts its speedup from its own acceptance and the fitted costs, and says
whether the measurement falls inside the 95% prediction interval (model uncertainty, acceptance noise and the
measurement's own standard error together).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.results import ROOT

STEP_PARAMS = ("a_T", "b_T", "e_T", "a_D", "b_D", "e_D", "x_D", "o_D", "o_N", "x_E", "o_S", "z_B", "z_S", "h_T", "h_D")
TTFT_PARAMS = ("q0", "q1", "q2", "u0", "u1", "u_N", "u_E", "u_S")
SPECULATIVE = ("draft_model", "ngram", "eagle3", "suffix")
ONE_REQUEST_ONLY = ("eagle3", "suffix")  # timed one request at a time only (04): no step cost measured at n > 1
DRAWS = 400  # parameter draws for the model's uncertainty
SPLIT_RULE = ("fit: 04's k sweep at its shortest and longest k (T = 0, both categories); 04's EAGLE-3 and suffix "
              "points at T = 0; 05 at its shortest and longest prompt length; 06 at its smallest and largest "
              "concurrency; the sampler's cost at T > 0 measured in-engine (scripts/step_breakdown.py) and the knee on "
              "vLLM's matmul kernels (gemm_knee), neither fitted. Held out: "
              "every other speculative point of 04, 05 and 06 (04 at the profile's k and the k between, every "
              "method at T > 0, n-gram at every temperature; 05's middle lengths; 06's middle concurrencies).")
# The sampler's cost per step and sequence at T = 1 less T = 0, measured in-engine (scripts/step_breakdown.py, 8
# prompts per category, one request at a time, structured and creative) on the 2-core AVX2-only EPYC
SAMPLER_MEASUREMENT = ROOT / "data" / "measurements" / "step-breakdown-2026-12-06-avx2-t0-t1.csv"


def draft_share(method: str, k: int, verify_steps: float, drafted_steps: float, draft_tokens: float) -> float:
    """f of the step cost: the share of the k draft slots a step fills. n-gram drafts k tokens or none (the share of
    steps that drafted); suffix decoding drafts any number up to k (draft tokens per step over k); the draft model
    and EAGLE-3 always draft k."""
    if method == "ngram":
        return drafted_steps / verify_steps if verify_steps > 0 else float("nan")
    if method == "suffix":
        return draft_tokens / (k * verify_steps) if verify_steps > 0 and k > 0 else float("nan")
    return 1.0


# ---- the split ---------------------------------------------------------------------------------------------------

def points(grid: pd.DataFrame | None, long: pd.DataFrame | None, batch: pd.DataFrame | None) -> pd.DataFrame:
    """One row per measured arm of 04, 05 and 06 with what the model reads: source, point, method, k, n (concurrent
    sequences), prompt and output tokens, ctx (mean context during decode), step times (arm and its baseline),
    TTFTs, f, tau, measured speedup and its log standard error; and ``fit`` (:func:`in_fit`)."""
    frames = []
    if grid is not None and len(grid):
        g = grid[grid["method"] != "baseline"].assign(source="04", n=1)
        if "draft_tokens_per_step" in g:  # suffix decoding's f (draft_share), from the point's own counters
            suffix = g["method"] == "suffix"
            g.loc[suffix, "draft_fraction"] = g.loc[suffix, "draft_tokens_per_step"] / g.loc[suffix, "k"]
        g["point"] = "04 " + g["category"] + " T=" + g["temperature"].map("{:g}".format) + " " + g["arm"]
        frames.append(g)
    if long is not None and len(long):
        long_arms = long[long["arm"] != "baseline"].assign(source="05", n=1)
        long_arms["point"] = "05 " + long_arms["arm"] + " at " + long_arms["prompt_length"].astype(str) + " tokens"
        frames.append(long_arms)
    if batch is not None and len(batch):
        b = batch[batch["arm"] != "baseline"].assign(source="06")
        b["n"] = b["concurrency"]
        b["point"] = "06 " + b["arm"] + " n=" + b["n"].astype(str)
        frames.append(b)
    columns = ["source", "point", "method", "k", "temperature", "n", "prompt_tokens", "output_tokens", "step_ms",
               "baseline_step_ms", "ttft_ms", "baseline_ttft_ms", "draft_fraction", "tokens_per_verify_step",
               "speedup", "speedup_ci_low", "speedup_ci_high", "log_se", "interval", "prompts", "category",
               "prompt_length", "request_tau"]
    out = pd.concat([f.reindex(columns=columns) for f in frames], ignore_index=True)
    out["ctx"] = out["prompt_tokens"] + out["output_tokens"] / 2
    out["temperature"] = out["temperature"].fillna(0.0)  # a frame without the column was measured at T = 0
    out["fit"] = in_fit(out)
    return out


def in_fit(p: pd.DataFrame) -> pd.Series:
    """The fit split (:data:`SPLIT_RULE`), decided from the design of each notebook's sweep, not from its results."""
    fit = pd.Series(False, index=p.index)
    g = p["source"] == "04"
    if g.any():
        ks = p.loc[g & (p["method"] == "draft_model"), "k"]
        fit |= g & (p["temperature"] == 0) & p["k"].isin([ks.min(), ks.max()]) & (ks.min() < ks.max())
        fit |= g & (p["temperature"] == 0) & p["method"].isin(ONE_REQUEST_ONLY)
    for source, column in (("05", "prompt_length"), ("06", "n")):
        s = p["source"] == source
        if s.any():
            values = p.loc[s, column]
            fit |= s & p[column].isin([values.min(), values.max()])
    return fit


def sampler_costs(breakdown: pd.DataFrame | Path = SAMPLER_MEASUREMENT) -> dict[str, tuple[float, float]]:
    """z_B and z_S (seconds per step and sequence, with a standard error) from a per-step spy's table
    (``scripts/step_breakdown.py``): the sampler's time at the highest temperature less at T = 0, for the baseline
    (z_B) and every speculative arm (z_S), per category; the value is the mean over those differences, its error
    their standard deviation (the spread between arms and categories, not the far smaller error of each mean); with a
    single difference, whose spread is unknown, the error is the value itself."""
    table = pd.read_csv(breakdown) if isinstance(breakdown, Path) else breakdown
    hottest = table["temperature"].max()
    if hottest <= 0 or not (table["temperature"] == 0).any():
        raise ValueError("the sampler's cost needs a step breakdown at T = 0 and at T > 0")
    cold, hot = (table[table["temperature"] == t].set_index(["category", "arm"])["sampler_ms"] for t in (0, hottest))
    extra = (hot - cold).dropna() / 1000
    plain = extra[extra.index.get_level_values("arm") == "baseline"]
    speculative = extra[extra.index.get_level_values("arm") != "baseline"]
    if plain.empty or speculative.empty:
        raise ValueError("the sampler's cost needs the baseline and a speculative arm at both temperatures")
    return {name: (float(d.mean()), float(d.std(ddof=1)) if len(d) > 1 else float(d.mean()))
            for name, d in (("z_B", plain), ("z_S", speculative))}


# ---- costs -------------------------------------------------------------------------------------------------------

def _rising(tokens):
    """How a pass's cost departs from a straight line in the tokens it computes: sqrt(N) - 1, 0 for one token. On
    this CPU each added sequence costs less than the one before (06's plain steps: +5.9 ms from 1 to 2 sequences,
    +2.4 ms a sequence from 4 to 8)."""
    return np.sqrt(tokens) - 1


def _above_knee(tokens, knee: int = 1):
    """The tokens a pass's matrix products are charged for: none more up to ``knee`` tokens (counted as 1), one more
    for each token past it. On the AVX-512 machine class vLLM-CPU's oneDNN products cost the same for 1 to about 5
    rows (the step spy, data/measurements/step-breakdown-2026-12-06-avx512-k-sweep.csv: the target scored 2, 3, 5
    and 9 tokens in 31.7, 25.0, 23.9 and 29.0 ms against 27-29 ms for one); knee 1 is a pass that grows from the
    first token on. The knee is measured on the machine, not fitted (:func:`gemm_knee`)."""
    return np.maximum(tokens, knee) - knee + 1


def linear_shapes(config: dict) -> list[tuple[int, int, int]]:
    """(out features, in features, how many) of a Llama-style model's linear layers: each layer's fused qkv, o,
    gate_up and down projections, and the output head."""
    hidden, layers, heads = config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    kv_heads = config.get("num_key_value_heads") or heads
    inter = config["intermediate_size"]
    return [((heads + 2 * kv_heads) * head_dim, hidden, layers), (hidden, heads * head_dim, layers),
            (2 * inter, hidden, layers), (hidden, inter, layers), (config["vocab_size"], hidden, 1)]


def gemm_times(config: dict, dtype: str = "float32", rows: Sequence[int] = tuple(range(1, 17)), repeats: int = 10,
               rounds: int = 5) -> pd.DataFrame:
    """Seconds a model's linear layers take for one pass of each number of rows (tokens), through vLLM-CPU's own
    dispatch (``dispatch_cpu_unquantized_gemm``: oneDNN, sgl-kernel or zentorch, as vLLM picks them on this CPU),
    on random weights of the model's shapes (:func:`linear_shapes`): ``rounds`` sweeps over the rows after one
    discarded warm-up sweep, each time the mean of ``repeats`` calls."""
    import time

    import torch
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    torch.manual_seed(0)
    layers = []
    for out_features, in_features, count in linear_shapes(config):
        layer = torch.nn.Linear(in_features, out_features, bias=False, dtype=getattr(torch, dtype))
        dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
        layers.append((layer, count))
    inputs = {m: [torch.randn(m, layer.in_features, dtype=layer.weight.dtype) for layer, _ in layers] for m in rows}

    def one_pass(m: int) -> float:
        total = 0.0
        for (layer, count), x in zip(layers, inputs[m]):
            start = time.perf_counter()
            for _ in range(repeats):
                layer.cpu_linear(x, layer.weight, None)
            total += (time.perf_counter() - start) / repeats * count
        return total

    with torch.no_grad():
        for m in rows:
            one_pass(m)
        return pd.DataFrame([{"round": r, "rows": m, "seconds": one_pass(m)} for r in range(rounds) for m in rows])


def _hinge_knee(rows: np.ndarray, seconds: np.ndarray) -> int:
    """The knee of a + b max(rows - knee, 0) fitted by least squares on relative errors, over every knee from the
    fewest rows to the next-to-most (the fewest: the time grows from the first row on)."""
    best = None
    for knee in rows[:-1]:
        x = np.column_stack([np.ones_like(rows), np.maximum(rows - knee, 0)]) / seconds[:, None]
        residual = float(((1 - x @ np.linalg.lstsq(x, np.ones_like(rows), rcond=None)[0]) ** 2).sum())
        if best is None or residual < best[0]:
            best = (residual, int(knee))
    return best[1]


def gemm_knee(times: pd.DataFrame) -> int:
    """The rows up to which a pass of the linear layers costs what one row's does: the median over the rounds of
    :func:`gemm_times` of each round's hinge knee (the lower middle one for an even count)."""
    knees = sorted(_hinge_knee(r["rows"].to_numpy(float), r["seconds"].to_numpy(float))
                   for _, r in times.groupby("round"))
    return knees[(len(knees) - 1) // 2]


def machine_knee(profile) -> tuple[int, pd.DataFrame | None]:
    """The knee of this machine for a profile's target (:func:`gemm_knee` of :func:`gemm_times`) and the times it
    came from; off the CPU 1 and no times (a GPU pass is costed from the roofline, :class:`RooflineCosts`)."""
    from helpers.vram import load_config

    if profile.device != "cpu":
        return 1, None
    times = gemm_times(load_config(profile.target), profile.dtype)
    return gemm_knee(times), times


def knee_summary(times: pd.DataFrame, knee: int) -> str:
    """One line on :func:`gemm_times`: the median time per row count over the rounds, and the knee."""
    per_rows = times.groupby("rows")["seconds"].median() * 1000
    return (f"the target's linear layers, one pass through vLLM's matmul kernels (median of "
            f"{times['round'].nunique()} rounds): " + ", ".join(f"{m} rows {ms:.1f} ms" for m, ms in per_rows.items())
            + f"; knee: {knee} rows")


@dataclass(frozen=True)
class Costs:
    """Step and prefill costs: fitted parameters (seconds) and their covariance."""
    step: np.ndarray
    step_cov: np.ndarray
    ttft: np.ndarray
    ttft_cov: np.ndarray
    label: str = "fitted to this kit's measurements"
    # the methods whose step times were in the fit (a term no row informs is 0, which is not a cost of 0)
    methods: tuple[str, ...] = ("baseline", "draft_model", "ngram")
    knee: int = 1  # a pass of up to this many tokens costs what one token's does (:func:`_above_knee`)

    def draws(self, n: int = DRAWS, seed: int = 0) -> list[Costs]:
        rng = np.random.default_rng(seed)
        steps = rng.multivariate_normal(self.step, self.step_cov, n, method="svd")
        ttfts = rng.multivariate_normal(self.ttft, self.ttft_cov, n, method="svd")
        return [Costs(s, self.step_cov, t, self.ttft_cov, self.label, self.methods, self.knee)
                for s, t in zip(steps, ttfts)]

    def check(self, method: str) -> None:
        if method not in self.methods:
            raise ValueError(f"the speed model has no step cost for {method}: it was fitted to "
                             f"{', '.join(self.methods)} (notebook 04 times {method}, notebook 06 fits the model)")

    def _fitted_pass(self, first: int, rising: int, tokens, ctx):
        """t(N, ctx) of the module's docstring from the parameters a, b, e at ``first`` and h at ``rising``."""
        a, b, e = self.step[first:first + 3]
        m = _above_knee(tokens, self.knee)
        return a + b * m + e * tokens * ctx + self.step[rising] * _rising(m)

    def target(self, tokens, ctx):
        return self._fitted_pass(0, 13, tokens, ctx)

    def draft(self, tokens, ctx):
        return self._fitted_pass(3, 14, tokens, ctx)

    def step_s(self, method: str, n: int, k: int, ctx: float, f: float = 1.0, temperature: float = 0.0) -> float:
        """One decode step of ``n`` sequences: plain (``baseline``), or verifying k drafted tokens."""
        self.check(method)
        base = self.target(n, ctx)
        sampling = n * (temperature > 0)
        if method == "baseline":
            return base + sampling * self.step[11]
        verify = self.target(n * (k + 1), ctx)
        if method == "draft_model":
            step = verify + k * (self.draft(n, ctx) + self.step[6]) + self.step[7]
        elif method == "ngram":
            step = base + f * (verify - base) + self.step[8]
        elif method == "eagle3":
            step = verify + k * self.step[9]
        elif method == "suffix":
            step = self.target(n * (1 + f * k), ctx) + self.step[10]
        else:
            raise ValueError(f"no cost model for method {method!r}")
        return step + sampling * self.step[12]

    def ttft_s(self, method: str, prompt_tokens: float) -> float:
        q0, q1, q2, u0, u1, u_n, u_e, u_s = self.ttft
        base = q0 + q1 * prompt_tokens + q2 * prompt_tokens ** 2
        return base + {"baseline": 0.0, "draft_model": u0 + u1 * prompt_tokens, "ngram": u_n, "eagle3": u_e,
                       "suffix": u_s}[method]


class RooflineCosts(Costs):
    """Costs of a pair on a GPU from the roofline, for a pair the kit did not measure: a step reads every weight and
    each sequence's KV cache once at the card's bandwidth, or computes 2 x parameters FLOPs per token at its tensor
    rate, whichever takes longer (flat in the number of tokens until compute-bound); prefill is compute-bound. No
    launch, synchronisation or sampler cost: a floor. Real drafts usually cost more than their byte share."""

    def __init__(self, target: dict, draft: dict, bandwidth: float, flops: float, label: str):
        super().__init__(np.zeros(len(STEP_PARAMS)), np.zeros((len(STEP_PARAMS),) * 2), np.zeros(len(TTFT_PARAMS)),
                         np.zeros((len(TTFT_PARAMS),) * 2), label, ("baseline", "draft_model", "ngram", "suffix"))
        object.__setattr__(self, "models", (target, draft, bandwidth, flops))

    def _pass(self, model: dict, tokens, ctx):
        _, _, bandwidth, flops = self.models
        memory = (model["weight_bytes"] + tokens * model["kv_bytes_per_token"] * ctx) / bandwidth
        return np.maximum(memory, 2 * model["params"] * tokens / flops)

    def target(self, tokens, ctx):
        return self._pass(self.models[0], tokens, ctx)

    def draft(self, tokens, ctx):
        return self._pass(self.models[1], tokens, ctx)

    def ttft_s(self, method: str, prompt_tokens: float) -> float:
        target, draft, _, flops = self.models
        extra = 2 * draft["params"] * prompt_tokens / flops if method == "draft_model" else 0.0
        return 2 * target["params"] * prompt_tokens / flops + extra

    def draws(self, n: int = DRAWS, seed: int = 0) -> list[Costs]:
        return []  # no fitted parameters, so no parameter uncertainty: the label says what it is


def _design(method: str, n, k, ctx, f, temperature: float = 0.0, knee: int = 1) -> list[float]:
    """One row of the step-cost fit: the coefficients of :data:`STEP_PARAMS` in :meth:`Costs.step_s`."""
    sampling = n * (temperature > 0)
    m = _above_knee(n, knee)
    if method == "baseline":
        return [1, m, n * ctx, 0, 0, 0, 0, 0, 0, 0, 0, sampling, 0, _rising(m), 0]
    if method == "draft_alone":
        return [0, 0, 0, 1, m, n * ctx, 0, 0, 0, 0, 0, 0, 0, 0, _rising(m)]
    if method in ("draft_model", "eagle3"):
        t = n * (k + 1)
        mt = _above_knee(t, knee)
        if method == "eagle3":
            return [1, mt, t * ctx, 0, 0, 0, 0, 0, 0, k, 0, 0, sampling, _rising(mt), 0]
        return [1, mt, t * ctx, k, k * m, k * n * ctx, k, 1, 0, 0, 0, 0, sampling, _rising(mt), k * _rising(m)]
    if method == "ngram":  # drafts k tokens or none: a share f of the steps verifies k + 1 tokens a sequence
        mt = _above_knee(n * (k + 1), knee)
        return [1, (1 - f) * m + f * mt, n * (1 + f * k) * ctx, 0, 0, 0, 0, 0, 1, 0, 0, 0, sampling,
                (1 - f) * _rising(m) + f * _rising(mt), 0]
    if method == "suffix":  # drafts f k tokens on average
        t = n * (1 + f * k)
        mt = _above_knee(t, knee)
        return [1, mt, t * ctx, 0, 0, 0, 0, 0, 0, 0, 1, 0, sampling, _rising(mt), 0]
    raise ValueError(method)


def _ttft_design(method: str, p: float) -> list[float]:
    extra = {"baseline": (0, 0, 0, 0, 0), "draft_model": (1, p, 0, 0, 0), "ngram": (0, 0, 1, 0, 0),
             "eagle3": (0, 0, 0, 1, 0), "suffix": (0, 0, 0, 0, 1)}[method]
    return [1, p, p * p, *extra]


def _wls(rows: list[list[float]], y: list[float], names: Sequence[str],
         known: dict[str, tuple[float, float]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Least squares on relative errors, every parameter a time and so >= 0; covariance from the residuals over the
    parameters off that bound. A parameter the data cannot identify (no row informs it) is 0 with 0 variance.
    ``known``: parameters measured elsewhere, name -> (value, standard error), taken as they are."""
    from scipy.optimize import lsq_linear

    if not rows:
        return np.zeros(len(names)), np.zeros((len(names), len(names)))
    x, y = np.asarray(rows, float), np.asarray(y, float)
    theta, cov = np.zeros(len(names)), np.zeros((len(names), len(names)))
    fixed = np.zeros(len(names), bool)
    for name, (value, se) in (known or {}).items():
        i = list(names).index(name)
        theta[i], cov[i, i], fixed[i] = value, se ** 2, True
    used = (np.abs(x).sum(axis=0) > 0) & ~fixed
    xw, yw = x[:, used] / y[:, None], 1 - (x[:, fixed] @ theta[fixed]) / y
    theta_used = lsq_linear(xw, yw, bounds=(0, np.inf)).x
    free = theta_used > 0
    dof = max(len(y) - free.sum(), 1)
    sigma2 = float(((yw - xw @ theta_used) ** 2).sum() / dof)
    cov_used = np.zeros((used.sum(), used.sum()))
    cov_used[np.ix_(free, free)] = sigma2 * np.linalg.pinv(xw[:, free].T @ xw[:, free])
    theta[used] = theta_used
    cov[np.ix_(used, used)] = cov_used
    return theta, cov


def step_observations(p: pd.DataFrame) -> pd.DataFrame:
    """Step times of the fit split: each arm's, and the baseline's it was paired with (same n and ctx)."""
    rows = []
    for _, r in p[p["fit"]].iterrows():
        f = r["draft_fraction"] if r["method"] in ("ngram", "suffix") else 1.0
        if r["step_ms"] == r["step_ms"]:
            rows.append({"method": r["method"], "n": r["n"], "k": r["k"], "ctx": r["ctx"], "f": f,
                         "temperature": r["temperature"], "step_s": r["step_ms"] / 1000, "point": r["point"]})
        if r["baseline_step_ms"] == r["baseline_step_ms"]:
            rows.append({"method": "baseline", "n": r["n"], "k": 0, "ctx": r["ctx"], "f": 0.0,
                         "temperature": r["temperature"], "step_s": r["baseline_step_ms"] / 1000, "point": r["point"]})
    return pd.DataFrame(rows)


def fit(p: pd.DataFrame, sampler: dict[str, tuple[float, float]] | None = None, knee: int = 1) -> Costs:
    """Fit step and prefill costs to the fit split of :func:`points`; the sampler's cost at T > 0 is taken from
    ``sampler`` (default: :func:`sampler_costs` of the kit's in-engine measurement), not fitted, and so is the knee
    (the tokens a pass scores at one token's cost, :func:`_above_knee`), measured by :func:`gemm_knee`."""
    sampler = sampler_costs() if sampler is None else sampler
    obs = step_observations(p)
    obs = obs[np.isfinite(obs["step_s"]) & np.isfinite(obs["f"].astype(float))]
    step, step_cov = _wls([_design(m, n, k, c, f, temp, knee) for m, n, k, c, f, temp in
                           obs[["method", "n", "k", "ctx", "f", "temperature"]].itertuples(index=False)],
                          obs["step_s"].tolist(), STEP_PARAMS, sampler)
    ttft_rows, ttft_y = [], []
    one = p[p["fit"] & (p["n"] == 1)]
    for _, r in one.iterrows():
        if r["method"] in SPECULATIVE and r["ttft_ms"] == r["ttft_ms"]:
            ttft_rows.append(_ttft_design(r["method"], r["prompt_tokens"]))
            ttft_y.append(r["ttft_ms"] / 1000)
        if r["baseline_ttft_ms"] == r["baseline_ttft_ms"]:
            ttft_rows.append(_ttft_design("baseline", r["prompt_tokens"]))
            ttft_y.append(r["baseline_ttft_ms"] / 1000)
    ttft, ttft_cov = _wls(ttft_rows, ttft_y, TTFT_PARAMS)  # zeros when there are no rows
    label = Costs.label + ("; the sampler at T > 0 measured in-engine" if sampler else "")
    if knee > 1:
        label += f"; a pass flat up to {knee} tokens (the knee of vLLM's matmuls on this CPU)"
    if not ttft_rows:
        label += ", without prefill (no TTFT measured in the fit split: run 04 or 05 first)"
    methods = tuple(m for m in ("baseline", *SPECULATIVE) if m in set(obs["method"]))
    return Costs(step, step_cov, ttft, ttft_cov, label, methods, knee)


# ---- predictions -------------------------------------------------------------------------------------------------

def _wave_decode_s(costs: Costs, method: str, k: int, taus, decode_tokens: float, ctx: float, f: float,
                   step_by_size: np.ndarray | None = None, temperature: float = 0.0) -> np.ndarray | float:
    """Decode time of requests submitted together: each needs decode_tokens / tau steps; as requests finish the
    batch shrinks, so each stretch is timed at the number of sequences still running. ``taus``: one wave (a float
    back), or an array whose last axis is the wave and whose next-to-last axis is summed over (the waves served one
    after another; an array back, one per leading row). ``step_by_size[m - 1]`` is a step's cost at m sequences."""
    taus = np.asarray(taus, float)
    waves = taus.reshape(1, 1, -1) if taus.ndim == 1 else taus
    size = waves.shape[-1]
    if method == "baseline":
        total = np.full(waves.shape[0], waves.shape[1] * decode_tokens * costs.step_s("baseline", size, k, ctx,
                                                                                         temperature=temperature))
    else:
        if step_by_size is None:
            step_by_size = costs.step_s(method, np.arange(1, size + 1), k, ctx, f, temperature)
        steps = np.sort(decode_tokens / waves, axis=-1)
        stretches = np.diff(steps, axis=-1, prepend=0.0)  # the i-th: steps with size - i sequences still running
        total = (stretches @ np.asarray(step_by_size)[size - 1::-1]).sum(axis=-1)
    return float(total[0]) if taus.ndim == 1 else total


def _waves_speedups(costs: Costs, method: str, k: int, n: int, samples: np.ndarray, prompt_tokens: float,
                    output_tokens: float, f: float, temperature: float = 0.0) -> np.ndarray:
    """Throughput speedup of each row of ``samples`` (tokens per decode step of its requests), served in waves of
    n in the row's order, the last wave as full as the row leaves it."""
    samples = np.atleast_2d(np.asarray(samples, float))
    decode_tokens, ctx = output_tokens - 1, prompt_tokens + output_tokens / 2
    step_by_size = costs.step_s(method, np.arange(1, n + 1), k, ctx, f, temperature)
    whole = samples.shape[1] // n * n
    rows, rest = len(samples), samples.shape[1] - whole
    base = spec = 0.0
    for waves in (samples[:, :whole].reshape(rows, whole // n, n), samples[:, whole:].reshape(rows, 1, rest)):
        if waves.size:  # whole waves, then the rest
            count, size = waves.shape[1:]
            base = base + count * costs.ttft_s("baseline", prompt_tokens * size) + _wave_decode_s(
                costs, "baseline", k, waves, decode_tokens, ctx, f, temperature=temperature)
            spec = spec + count * costs.ttft_s(method, prompt_tokens * size) + _wave_decode_s(
                costs, method, k, waves, decode_tokens, ctx, f, step_by_size, temperature)
    return base / spec


def _one_request_speedups(costs: Costs, method: str, k: int, taus, prompt_tokens, output_tokens,
                          f: float, temperature: float = 0.0) -> np.ndarray:
    """Each request's latency speedup served alone (arrays over requests, or scalars for lengths)."""
    taus, prompt_tokens = np.asarray(taus, float), np.asarray(prompt_tokens, float)
    decode_tokens, ctx = np.asarray(output_tokens, float) - 1, prompt_tokens + np.asarray(output_tokens, float) / 2
    base = costs.ttft_s("baseline", prompt_tokens) + decode_tokens * costs.step_s("baseline", 1, k, ctx,
                                                                                   temperature=temperature)
    spec = costs.ttft_s(method, prompt_tokens) + decode_tokens / taus * costs.step_s(method, 1, k, ctx, f, temperature)
    return base / spec


def _speedup(costs: Costs, method: str, k: int, n: int, taus: Sequence[float], prompt_tokens: float,
             output_tokens: float, f: float, temperature: float = 0.0) -> float:
    """Predicted speedup: one request at a time (n = 1), the geometric mean over requests of per-request latency
    ratios; n > 1, the ratio of total times of the requests served in waves of n (throughput)."""
    if n == 1:
        return float(np.exp(np.mean(np.log(_one_request_speedups(costs, method, k, taus, prompt_tokens,
                                                                 output_tokens, f, temperature)))))
    return float(_waves_speedups(costs, method, k, n, taus, prompt_tokens, output_tokens, f, temperature)[0])


def predict(costs: Costs, method: str, k: int, n: int, taus: Sequence[float], prompt_tokens: float,
            output_tokens: float, f: float = 1.0, draws: list[Costs] | None = None,
            temperature: float = 0.0) -> dict[str, float]:
    """Predicted speedup for requests with tokens per decode step ``taus`` and the model's own log standard error
    (over parameter draws)."""
    estimate = _speedup(costs, method, k, n, taus, prompt_tokens, output_tokens, f, temperature)
    sampled = [_speedup(d, method, k, n, taus, prompt_tokens, output_tokens, f, temperature) for d in (draws or [])]
    sampled = np.log([s for s in sampled if s > 0])
    return {"speedup": estimate, "model_se": float(sampled.std()) if len(sampled) > 1 else 0.0}


def cost_terms(costs: Costs, k: int, ctx: float, sizes: Sequence[int]) -> pd.DataFrame:
    """The step-cost ratio of a draft-model step split into its terms, per number of concurrent sequences."""
    rows = []
    for n in sizes:
        base = costs.target(n, ctx)
        rows.append({"n": n, "target_step_ms": 1000 * base,
                     "k_c_draft": k * (costs.draft(n, ctx) + costs.step[6]) / base,
                     "verify_extra": (costs.target(n * (k + 1), ctx) - base) / base,
                     "overhead": costs.step[7] / base,
                     "step_cost_ratio": costs.step_s("draft_model", n, k, ctx) / base})
    return pd.DataFrame(rows)


def _point_taus(r: pd.Series, acceptance: pd.DataFrame | None) -> tuple[list[float], float, str]:
    """Per-request tau of a point, the log standard error it adds (sampling noise of acceptance at T > 0), and where
    it came from: 04's untimed acceptance runs for its timed prompts, else the point's own counters."""
    if acceptance is not None and r["source"] == "04":
        rows = acceptance[(acceptance["category"] == r["category"]) & (acceptance["method"] == r["method"])
                          & (acceptance["k"] == r["k"]) & (acceptance["temperature"] == r["temperature"])]
        if r["prompts"] == r["prompts"]:
            rows = rows[rows["prompt_index"] < r["prompts"]]  # the timed prompts are the category's first ones
        if len(rows):
            taus = rows["tau"].dropna().tolist()
            se = 0.0
            if r["temperature"] > 0 and "tau_repeat" in rows and rows["tau_repeat"].notna().all():
                taus += rows["tau_repeat"].tolist()
                se = resampled_acceptance_se(rows["tau"], rows["tau_repeat"])
            elif r["temperature"] > 0 and "tau_se" in rows:  # older frames: one sample, steps taken as independent
                se = float(np.sqrt((rows["tau_se"] ** 2 / rows["tau"] ** 2).sum()) / len(rows))
            return taus, se, "04's batched acceptance run"
    tau = r["request_tau"]
    if isinstance(tau, str):
        tau = [float(x) for x in tau.strip("[]").split(",") if x.strip()]
    if isinstance(tau, list) and tau:
        return tau, 0.0, "the point's own per-request counters"
    return [float(r["tokens_per_verify_step"])], 0.0, "the point's own counters"


def resampled_acceptance_se(tau: Sequence[float], tau_repeat: Sequence[float]) -> float:
    """Log standard error between a prediction made from two sampled runs' acceptance (``tau``, ``tau_repeat``: the
    same prompts, two independent samples at T > 0) and a third run of those prompts (the timed one).

    Per prompt, half the squared log difference of its two samples estimates one sample's variance s_i^2; the mean
    of a run over n prompts varies by sum(s_i^2) / n^2, the two-sample mean by half that, and the timed run adds its
    own: 1.5 sum(s_i^2) / n^2."""
    d = np.log(np.asarray(tau, float)) - np.log(np.asarray(tau_repeat, float))
    return float(np.sqrt(1.5 * (d ** 2 / 2).sum()) / len(d))


HELD_OUT_COLUMNS = ["point", "predicted", "low", "high", "measured", "measured_low", "measured_high",
                    "measured_interval", "inside", "acceptance_from", "model_se", "measurement_se", "acceptance_se"]


def held_out(p: pd.DataFrame, costs: Costs, acceptance: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every held-out speculative point: predicted speedup with its 95% prediction interval for the measurement
    (model, acceptance and the measurement's own standard error), the measured speedup and interval, and whether
    the measurement falls inside."""
    from scipy.stats import t

    draws = costs.draws()
    rows = []
    for _, r in p[~p["fit"] & p["method"].isin(SPECULATIVE)].iterrows():
        taus, tau_se, tau_from = _point_taus(r, acceptance)
        f = (r["draft_fraction"] if r["method"] in ("ngram", "suffix") and r["draft_fraction"] == r["draft_fraction"]
             else 1.0)
        prediction = predict(costs, r["method"], int(r["k"]), int(r["n"]), taus, r["prompt_tokens"],
                             r["output_tokens"], f, draws, r["temperature"])
        meas_se = r["log_se"] if r["log_se"] == r["log_se"] else 0.0
        prompts = int(r["prompts"]) if r["prompts"] == r["prompts"] else 3
        dof = max(prompts - 1, 1) if str(r["interval"]).startswith("95% CI over") else 2
        half = np.sqrt((1.96 * prediction["model_se"]) ** 2 + (1.96 * tau_se) ** 2 + (t.ppf(0.975, dof) * meas_se) ** 2)
        low, high = prediction["speedup"] * np.exp(-half), prediction["speedup"] * np.exp(half)
        rows.append({"point": r["point"], "predicted": prediction["speedup"], "low": low, "high": high,
                     "measured": r["speedup"], "measured_low": r["speedup_ci_low"],
                     "measured_high": r["speedup_ci_high"], "measured_interval": r["interval"],
                     "inside": bool(low <= r["speedup"] <= high), "acceptance_from": tau_from,
                     "model_se": prediction["model_se"], "measurement_se": meas_se, "acceptance_se": tau_se})
    return pd.DataFrame(rows, columns=HELD_OUT_COLUMNS)


def fit_and_hold_out(grid: pd.DataFrame | None, long: pd.DataFrame | None, batch: pd.DataFrame,
                     acceptance: pd.DataFrame | None = None,
                     knee: int = 1) -> tuple[pd.DataFrame, Costs, pd.DataFrame]:
    """What notebook 06 ships from 04's, 05's and its own results: the points (06's arms at a k chosen by batch size
    left out: no fixed k to fit), the fitted costs (at ``knee``, :func:`gemm_knee` on the machine that measured
    them) and the held-out table."""
    p = points(grid, long, batch[~batch["arm"].str.contains("by batch size")])
    costs = fit(p, knee=knee)
    return p, costs, held_out(p, costs, acceptance)


def coverage(table: pd.DataFrame) -> dict[str, float]:
    """Share of held-out measurements inside their 95% intervals, and the intervals' median width (high / low)."""
    return {"points": len(table), "inside": float(table["inside"].mean()) if len(table) else float("nan"),
            "median_width": float((table["high"] / table["low"]).median()) if len(table) else float("nan")}


# ---- saved form --------------------------------------------------------------------------------------------------

def to_frame(costs: Costs) -> pd.DataFrame:
    """The fitted parameters with standard errors and covariances, one row per parameter (for the reference)."""
    rows = []
    for group, names, values, cov in (("step", STEP_PARAMS, costs.step, costs.step_cov),
                                      ("ttft", TTFT_PARAMS, costs.ttft, costs.ttft_cov)):
        for i, name in enumerate(names):
            rows.append({"group": group, "parameter": name, "value": values[i], "se": float(np.sqrt(cov[i, i])),
                         "covariance": [float(x) for x in cov[i]], "split": SPLIT_RULE, "label": costs.label,
                         "methods": " ".join(costs.methods), "knee": costs.knee})
    return pd.DataFrame(rows)


def _padded(values: np.ndarray, cov: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Parameters saved before later ones were added (new methods' terms, appended last): those are 0, unfitted."""
    out, out_cov = np.zeros(size), np.zeros((size, size))
    out[:len(values)], out_cov[:len(values), :len(values)] = values, cov
    return out, out_cov


def from_frame(frame: pd.DataFrame) -> Costs:
    def block(group):
        rows = frame[frame["group"] == group]
        cov = [x if isinstance(x, list) else [float(v) for v in str(x).strip("[]").split(",")]
               for x in rows["covariance"]]
        return rows["value"].to_numpy(float), np.asarray(cov, float)

    step, step_cov = _padded(*block("step"), len(STEP_PARAMS))
    ttft, ttft_cov = _padded(*block("ttft"), len(TTFT_PARAMS))
    labels = frame["label"].dropna() if "label" in frame else []  # saved before the label was: the default
    label = labels.iloc[0] if len(labels) else Costs.label
    methods = frame["methods"].dropna() if "methods" in frame else []  # saved before: draft model and n-gram
    knees = frame["knee"].dropna() if "knee" in frame else []  # saved before the knee: a pass growing from 1 token
    return Costs(step, step_cov, ttft, ttft_cov, label, tuple(methods.iloc[0].split()) if len(methods) else Costs.methods,
                 int(knees.iloc[0]) if len(knees) else 1)


def category_prediction(costs: Costs, per_prompt: pd.DataFrame, n: int = 1, prompt_tokens: float | None = None,
                        output_tokens: float | None = None, draws: list[Costs] | None = None,
                        resamples: int = 200, temperature: float | None = None) -> dict:
    """Predicted speedup of one (category, temperature, method, k) from each prompt's measured tokens per decode
    step (``per_prompt``: rows of :func:`helpers.sweeps.acceptance`), with a 95% interval that joins the spread over
    prompts (the prompts being the sample) and the model's uncertainty. Prompt and answer length default to each
    prompt's own (n = 1) or their medians (n > 1), the temperature (which sets the sampler's cost) to the rows'.

    One request at a time (n = 1): the geometric mean over prompts of each prompt's latency speedup, a t interval
    over prompts. n > 1: the throughput of the category's prompts sent in waves of n, mixed as they come (cycled to
    fill the last wave), as 06 measures them: a wave lasts as long as its slowest request, so prompts that accept
    little hold up the others, which a wave of identical prompts would hide; the interval is a bootstrap over
    prompts."""
    from scipy.stats import t

    rows = per_prompt.dropna(subset=["tau"])
    if rows.empty:
        raise ValueError("no prompt with a measured acceptance")
    method, k = rows["method"].iloc[0], int(rows["k"].iloc[0])
    f = draft_share(method, k, rows["verify_steps"].sum(), rows["drafted_steps"].sum(),
                    rows["draft_tokens"].sum() if "draft_tokens" in rows else float("nan"))
    draws = costs.draws() if draws is None else draws
    taus = rows["tau"].to_numpy(float)
    if temperature is None:
        temperature = float(rows["temperature"].iloc[0]) if "temperature" in rows else 0.0

    if n == 1:
        prompts = prompt_tokens or rows["prompt_tokens"].to_numpy(float)
        outputs = output_tokens or rows["output_tokens"].to_numpy(float)

        def each(c: Costs) -> np.ndarray:
            return np.log(_one_request_speedups(c, method, k, taus, prompts, outputs, f, temperature))

        logs = each(costs)
        centre = float(logs.mean())
        model_se = float(np.std([each(d).mean() for d in draws])) if draws else 0.0
        spread = (t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs)) if len(logs) >= 3
                  else float("nan"))
    else:
        prompt = prompt_tokens or float(rows["prompt_tokens"].median())
        output = output_tokens or float(rows["output_tokens"].median())
        whole = np.arange(-(-len(taus) // n) * n) % len(taus)  # the prompts cycled to whole waves of n

        def mixed(c: Costs, samples: np.ndarray) -> np.ndarray:
            return np.log(_waves_speedups(c, method, k, n, samples[..., whole], prompt, output, f, temperature))

        centre = float(mixed(costs, taus)[0])
        model_se = float(np.std([mixed(d, taus)[0] for d in draws])) if draws else 0.0
        rng = np.random.default_rng(0)
        boot = mixed(costs, rng.choice(taus, (resamples, len(taus)))) if len(taus) >= 3 else []
        spread = 1.96 * float(np.std(boot)) if len(boot) else float("nan")
    half = float(np.hypot(spread, 1.96 * model_se))
    speedup = float(np.exp(centre))
    waves = f" in waves of {n} mixed requests" if n > 1 else ""
    return {"speedup": speedup, "low": speedup * np.exp(-half), "high": speedup * np.exp(half), "prompts": len(taus),
            "interval": f"95% interval over {len(taus)} prompts{waves} and the model's uncertainty" if len(taus) >= 3
            else f"no interval: {len(taus)} prompt(s)"}


MODEL_FILE = "06_speed_model"


def load_fitted(profile: str = "cpu") -> tuple[Costs, str] | None:
    """The speed model fitted on this machine (notebook 06, ``build/results``), else the reference's; with a label
    saying which; None when neither exists."""
    from helpers import results

    frame = results.load(MODEL_FILE)
    if frame is not None:
        return from_frame(frame), "fitted on this machine (notebook 06)"
    frame = results.load_reference(MODEL_FILE, profile)
    if frame is not None:
        return from_frame(frame), results.reference_label(profile)
    return None
