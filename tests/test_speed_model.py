"""The speed model on measurements made by a known cost model: it recovers the costs, predicts the held-out points
inside their intervals, and a wrong model misses them."""

import numpy as np
import pandas as pd
import pytest

from helpers import speed_model
from helpers.speed_model import Costs

S, T = len(speed_model.STEP_PARAMS), len(speed_model.TTFT_PARAMS)
TRUE = Costs(step=np.array([0.030, 0.0012, 2e-6, 0.006, 0.0003, 4e-7, 0.0004, 0.002, 0.001, 0.003, 0.0015,
                            0.0005, 0.0025, 0.004, 0.0003]),
             step_cov=np.zeros((S, S)), ttft=np.array([0.05, 0.0009, 1e-7, 0.01, 0.0002, 0.002, 0.001, 0.003]),
             ttft_cov=np.zeros((T, T)), methods=("baseline", *speed_model.SPECULATIVE))
# the sampler's cost at T > 0 is measured in-engine, not fitted: the synthetic measurements' own
SAMPLER = {"z_B": (float(TRUE.step[11]), 0.0), "z_S": (float(TRUE.step[12]), 0.0)}


def _fit(p):
    return speed_model.fit(p, SAMPLER)


def _row(costs, rng, method, k, n, prompt_tokens, taus, noise=0.01, output_tokens=48, f=1.0, temperature=0.0,
         **extra):
    ctx = prompt_tokens + output_tokens / 2
    step = costs.step_s(method, n, k, ctx, f, temperature) if method != "draft_alone" else costs.draft(n, ctx)
    speedup = speed_model._speedup(costs, method, k, n, taus, prompt_tokens, output_tokens, f, temperature) \
        if method in speed_model.SPECULATIVE else float("nan")
    jitter = lambda: float(np.exp(rng.normal(0, noise)))  # noqa: E731
    measured = speedup * jitter()
    return {"method": method, "k": k, "n": n, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
            "step_ms": 1000 * step * jitter(),
            "baseline_step_ms": 1000 * costs.step_s("baseline", n, k, ctx, temperature=temperature) * jitter(),
            "ttft_ms": 1000 * (costs.ttft_s(method, prompt_tokens) if method != "draft_alone" else 0.01) * jitter(),
            "baseline_ttft_ms": 1000 * costs.ttft_s("baseline", prompt_tokens) * jitter(),
            "draft_fraction": f, "tokens_per_verify_step": float(np.mean(taus)), "speedup": measured,
            "speedup_ci_low": measured * np.exp(-2 * noise), "speedup_ci_high": measured * np.exp(2 * noise),
            "log_se": noise, "interval": "95% CI over 8 prompts", "prompts": 8, "request_tau": list(taus),
            "temperature": temperature, **extra}


def measurements(costs=TRUE, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    taus = list(rng.uniform(1.4, 2.8, 8))
    grid = pd.DataFrame([_row(costs, rng, "draft_model", k, 1, 60, taus, noise, category=c, arm=f"draft k={k}")
                         for c in ("structured", "creative") for k in (1, 2, 4, 8)]
                        + [_row(costs, rng, "draft_model", 4, 1, 60, taus, noise, category=c, arm="draft k=4",
                                temperature=t) for c in ("structured", "creative") for t in (0.5, 1.0)]
                        + [_row(costs, rng, "ngram", 4, 1, 60, taus, noise, f=0.5, category=c, arm="ngram k=4",
                                temperature=t) for c in ("structured", "creative") for t in (0.0, 1.0)]
                        + [_row(costs, rng, "eagle3", 4, 1, 60, taus, noise, category=c, arm="eagle3 k=4", temperature=t)
                           for c in ("structured", "creative") for t in (0.0, 1.0)]
                        + [_row(costs, rng, "suffix", 4, 1, 60, taus, noise, f=0.4, category=c, arm="suffix k=4",
                                temperature=t, draft_tokens_per_step=1.6, draft_fraction=0.9)
                           for c in ("structured", "creative") for t in (0.0, 1.0)])
    long = pd.DataFrame([_row(costs, rng, m, 4, 1, p, taus, noise, f=0.5 if m == "ngram" else 1.0, prompt_length=p,
                              arm=m) for p in (128, 400, 900, 2000) for m in ("draft_model", "ngram", "draft_alone")])
    batch = pd.DataFrame([_row(costs, rng, m, 4, n, 60, taus, noise, f=0.5 if m == "ngram" else 1.0, concurrency=n,
                               arm=m) for n in (1, 2, 4, 8) for m in ("draft_model", "ngram", "draft_alone")])
    return speed_model.points(grid, long, batch)


def test_the_split_is_fixed_by_design():
    p = measurements()
    fitted = set(p[p["fit"]]["point"])
    assert "04 structured T=0 draft k=1" in fitted and "04 structured T=0 draft k=8" in fitted
    assert "04 structured T=0 draft k=4" not in fitted and "06 draft_model n=2" not in fitted
    assert {"05 draft_model at 128 tokens", "05 draft_model at 2000 tokens", "06 ngram n=8"} <= fitted
    assert {"04 structured T=0 eagle3 k=4", "04 creative T=0 suffix k=4"} <= fitted  # T = 0 fits the newer methods
    assert "04 structured T=1 eagle3 k=4" not in fitted and "04 creative T=1 suffix k=4" not in fitted
    # every point at T > 0 is held out: the sampler's cost there is measured in-engine, not fitted
    assert not (p["fit"] & (p["temperature"] > 0)).any()


def test_fit_recovers_the_costs_and_predicts_held_out_points():
    p = measurements(noise=0.002)
    costs = _fit(p)
    terms_true = speed_model.cost_terms(TRUE, 4, 80, [1, 4, 8])
    terms_fit = speed_model.cost_terms(costs, 4, 80, [1, 4, 8])
    assert np.allclose(terms_fit["step_cost_ratio"], terms_true["step_cost_ratio"], rtol=0.03)
    table = speed_model.held_out(p, costs)
    assert len(table) == len(p[~p["fit"] & p["method"].isin(speed_model.SPECULATIVE)]) > 10
    assert np.allclose(table["predicted"], table["measured"], rtol=0.03)
    assert speed_model.coverage(table)["inside"] >= 0.85


def test_a_wrong_cost_model_misses_the_held_out_points():
    # Measured with a verify pass that costs 3x what the model is given: the predictions fall outside
    p = measurements(noise=0.002)
    wrong = Costs(TRUE.step * np.array([1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1]), np.zeros((S, S)), TRUE.ttft,
                  np.zeros((T, T)), methods=TRUE.methods)
    table = speed_model.held_out(p, wrong)
    assert speed_model.coverage(table)["inside"] < 0.3


def test_a_wave_lasts_as_long_as_its_slowest_request():
    flat = Costs(np.array([0.01, 0, 0, 0.001, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), np.zeros((S, S)), np.zeros(T),
                 np.zeros((T, T)))
    # step cost independent of n: two requests at tau 1 and 3 take as long as the tau-1 one alone
    assert speed_model._wave_decode_s(flat, "draft_model", 1, [1.0, 3.0], 30, 50, 1.0) == pytest.approx(
        speed_model._wave_decode_s(flat, "draft_model", 1, [1.0], 30, 50, 1.0))


def test_waves_are_timed_one_after_another_with_the_last_one_partial():
    # five requests in waves of two: (2.0, 1.5), (3.0, 1.2), (2.5), each wave timed alone and the times added
    taus, prompt, output = [2.0, 1.5, 3.0, 1.2, 2.5], 64, 48
    base = spec = 0.0
    for wave in ([2.0, 1.5], [3.0, 1.2], [2.5]):
        base += TRUE.ttft_s("baseline", prompt * len(wave)) + (output - 1) * TRUE.step_s("baseline", len(wave), 4, 88)
        spec += TRUE.ttft_s("ngram", prompt * len(wave)) + speed_model._wave_decode_s(TRUE, "ngram", 4, wave,
                                                                                      output - 1, 88, 0.5)
    assert speed_model._speedup(TRUE, "ngram", 4, 2, taus, prompt, output, 0.5) == pytest.approx(base / spec)
    # rows of samples are independent: each row's speedup is the one of that row alone
    rows = np.array([taus, taus[::-1]])
    assert speed_model._waves_speedups(TRUE, "ngram", 4, 2, rows, prompt, output, 0.5) == pytest.approx(
        [speed_model._speedup(TRUE, "ngram", 4, 2, list(r), prompt, output, 0.5) for r in rows])


def test_saved_parameters_round_trip():
    costs = _fit(measurements())
    back = speed_model.from_frame(pd.read_csv(_save(costs)))
    assert np.allclose(back.step, costs.step) and np.allclose(back.step_cov, costs.step_cov)
    assert back.methods == costs.methods == ("baseline", *speed_model.SPECULATIVE)


def test_a_model_saved_before_the_newer_methods_loads_and_refuses_to_predict_them():
    """The reference's model of 2026-12-04 has 9 step and 6 TTFT parameters and no list of methods: it loads with
    the newer terms at 0, and a prediction for EAGLE-3 or suffix decoding raises instead of costing them nothing."""
    frame = speed_model.to_frame(_fit(measurements()))
    old = frame[~frame["parameter"].isin(["x_E", "o_S", "z_B", "z_S", "h_T", "h_D", "u_E", "u_S"])].drop(
        columns="methods")
    old["covariance"] = [c[:9] if g == "step" else c[:6] for c, g in zip(old["covariance"], old["group"])]
    back = speed_model.from_frame(old)
    assert back.methods == ("baseline", "draft_model", "ngram") and len(back.step) == S and back.step[9:].sum() == 0
    assert back.step_s("draft_model", 1, 4, 80) > 0
    with pytest.raises(ValueError, match="no step cost for eagle3"):
        back.step_s("eagle3", 1, 4, 80)


def test_the_fit_recovers_a_pass_rising_slower_than_its_tokens_and_takes_the_sampler_as_measured():
    costs = _fit(measurements(noise=0.002))
    z_b, z_s, h_t = (speed_model.STEP_PARAMS.index(name) for name in ("z_B", "z_S", "h_T"))
    assert costs.step[h_t] == pytest.approx(TRUE.step[h_t], rel=0.25)
    measured = speed_model.fit(measurements(noise=0.002), {"z_B": (0.0007, 0.0001), "z_S": (0.003, 0.0002)})
    assert measured.step[z_b] == 0.0007 and measured.step[z_s] == 0.003
    assert np.sqrt(measured.step_cov[z_s, z_s]) == pytest.approx(0.0002)
    # what T > 0 adds: z_S a sequence to a speculative step (drafted or not), z_B to a plain one
    for method, extra in (("ngram", TRUE.step[z_s]), ("baseline", TRUE.step[z_b])):
        assert TRUE.step_s(method, 2, 4, 80, 0.0, 1.0) - TRUE.step_s(method, 2, 4, 80, 0.0) == pytest.approx(2 * extra)
    # each added sequence costs less than the one before
    steps = np.diff(TRUE.step_s("baseline", np.arange(1, 10), 4, 80))
    assert (np.diff(steps) < 0).all()


def test_the_sampler_cost_is_hot_less_cold_per_arm_and_category():
    def rows(temperature, baseline, speculative):
        return [{"category": c, "temperature": temperature, "arm": arm, "sampler_ms": ms}
                for c in ("structured", "creative") for arm, ms in (("baseline", baseline), ("draft 2l k=4", speculative[0]),
                                                                  ("ngram k=4", speculative[1]))]

    table = pd.DataFrame(rows(0.0, 0.2, (0.8, 0.6)) + rows(1.0, 0.8, (3.0, 2.6)))
    z = speed_model.sampler_costs(table)
    assert z["z_B"] == pytest.approx((0.0006, 0.0)) and z["z_S"][0] == pytest.approx(0.0021)
    assert z["z_S"][1] == pytest.approx(np.std([0.0022, 0.002, 0.0022, 0.002], ddof=1))
    with pytest.raises(ValueError, match="T = 0 and at T > 0"):
        speed_model.sampler_costs(table[table["temperature"] > 0])
    # the kit's own measurement: a speculative step's sampler costs more than a plain step's
    shipped = speed_model.sampler_costs()
    assert 0 < shipped["z_B"][0] < shipped["z_S"][0] < 0.01


def test_suffix_fills_as_many_draft_slots_as_it_drafted():
    assert speed_model.draft_share("suffix", 8, verify_steps=10, drafted_steps=9, draft_tokens=20) == 0.25
    assert speed_model.draft_share("ngram", 8, verify_steps=10, drafted_steps=9, draft_tokens=20) == 0.9
    assert speed_model.draft_share("eagle3", 8, verify_steps=10, drafted_steps=9, draft_tokens=20) == 1.0
    # the step of a suffix draft of 2 tokens costs the target scoring 3, not k + 1 = 9
    two = TRUE.step_s("suffix", 1, 8, 80, f=0.25)
    assert two == pytest.approx(TRUE.target(3, 80) + TRUE.step[10])


def _save(costs, path="/tmp/specdec_speed_model_test.csv"):
    speed_model.to_frame(costs).to_csv(path, index=False)
    return path


def test_a_category_at_several_requests_is_predicted_in_mixed_waves():
    """Issue 19: the busy-server prediction sent each prompt in a wave of copies of itself, which hides the wave's
    slowest request; 06 measured 0.62x where that predicted 0.90x. Mixed waves are slower when prompts differ and
    the same when they do not; the interval comes from resampling the prompts."""
    import pandas as pd

    def per_prompt(taus):
        return pd.DataFrame({"tau": taus, "method": "draft_model", "k": 4, "prompt_tokens": 64,
                             "output_tokens": 48, "drafted_steps": 10, "verify_steps": 10})

    varied = per_prompt([1.2, 3.5, 1.3, 3.4, 1.5, 3.2, 1.4, 3.6])
    mixed = speed_model.category_prediction(TRUE, varied, n=8, draws=[])
    copies = np.exp(np.mean(np.log([speed_model._speedup(TRUE, "draft_model", 4, 8, [tau] * 8, 64, 48, 1.0)
                                    for tau in varied["tau"]])))
    assert mixed["speedup"] < 0.9 * copies
    assert mixed["low"] < mixed["speedup"] < mixed["high"] and "waves of 8" in mixed["interval"]
    same = per_prompt([2.4] * 8)
    alike = speed_model.category_prediction(TRUE, same, n=8, draws=[])
    one_wave = speed_model._speedup(TRUE, "draft_model", 4, 8, [2.4] * 8, 64, 48, 1.0)
    assert alike["speedup"] == pytest.approx(one_wave) and alike["high"] == pytest.approx(alike["low"])


def test_without_prefill_measurements_the_step_costs_are_still_fitted_and_say_so():
    """06 run alone (04's and 05's results absent) has step times but no TTFT: the fit must not fail."""
    p = measurements()
    p = p[p["source"] == "06"].assign(ttft_ms=float("nan"), baseline_ttft_ms=float("nan"))
    costs = _fit(p)
    assert costs.step[0] > 0 and not costs.ttft.any() and "without prefill" in costs.label
    back = speed_model.from_frame(speed_model.to_frame(costs))
    assert back.label == costs.label  # the saved form keeps what the fit was made of
    assert speed_model.from_frame(speed_model.to_frame(costs).drop(columns="label")).label == speed_model.Costs.label


def test_acceptance_noise_between_sampled_runs_comes_from_two_samples():
    """At T > 0 each request's tau varies run to run as a whole (one sampled token changes the rest of the answer).
    Simulated: per prompt a true log tau, each run adds a run-level deviation of sd 0.15. The two-sample standard
    error is near the true one for a third run against the two-sample mean; a run's own step count says nothing."""
    rng = np.random.default_rng(1)
    n, sd = 8, 0.15
    truth = np.sqrt(1.5) * sd / np.sqrt(n)
    base = rng.uniform(np.log(1.3), np.log(2.5), n)
    estimates, misses = [], 0
    for _ in range(2000):
        a, b, c = (np.exp(base + rng.normal(0, sd, n)) for _ in range(3))
        se = speed_model.resampled_acceptance_se(a, b)
        estimates.append(se)
        gap = np.log(c).mean() - np.log(np.concatenate([a, b])).mean()
        misses += abs(gap) > 1.96 * se
    assert np.median(estimates) == pytest.approx(truth, rel=0.15)
    assert 0.02 < misses / 2000 < 0.1
    assert speed_model.resampled_acceptance_se([2.0] * n, [2.0] * n) == 0.0  # T = 0: identical samples


def test_held_out_points_at_t_above_0_use_both_samples():
    p = measurements(noise=0.002)
    costs = _fit(p)
    acceptance = pd.DataFrame([{"category": c, "method": "eagle3", "k": 4, "temperature": 1.0, "prompt_index": i,
                                "tau": 2.0, "tau_se": 0.05, "tau_repeat": 1.6}
                               for c in ("structured", "creative") for i in range(8)])
    table = speed_model.held_out(p, costs, acceptance).set_index("point")
    row = table.loc["04 structured T=1 eagle3 k=4"]
    assert row["acceptance_from"] == "04's batched acceptance run"
    assert row["acceptance_se"] == pytest.approx(speed_model.resampled_acceptance_se([2.0] * 8, [1.6] * 8))
    one_sample = speed_model.held_out(p, costs, acceptance.assign(tau_repeat=2.0)).set_index("point")
    assert row["predicted"] < one_sample.loc["04 structured T=1 eagle3 k=4", "predicted"]  # 1.6 enters the mean


def test_a_pass_flat_up_to_its_knee_is_recovered_when_the_knee_is_known():
    """On CPUs whose matmuls cost the same for a few rows, a pass is flat up to the knee: fitted at that knee the
    model recovers the costs and predicts the held-out points; fitted as a pass growing from one token, it does
    not (the k = 2 and k = 4 points lie below a line through k = 1 and k = 8)."""
    flat = Costs(TRUE.step * np.where(np.arange(S) == 13, 0.0, 1.0) * np.where(np.arange(S) == 1, 3.0, 1.0),
                 TRUE.step_cov, TRUE.ttft, TRUE.ttft_cov, methods=TRUE.methods, knee=6)
    assert flat.target(6, 80) - flat.target(1, 80) == pytest.approx(flat.step[2] * 5 * 80)
    p = measurements(flat, noise=0.002)
    at_knee = speed_model.fit(p, SAMPLER, knee=6)
    assert at_knee.knee == 6
    assert speed_model.held_out(p, at_knee)["inside"].all()
    assert not speed_model.held_out(p, speed_model.fit(p, SAMPLER))["inside"].all()
    frame = speed_model.to_frame(at_knee)
    assert speed_model.from_frame(frame).knee == 6
    assert speed_model.from_frame(frame.drop(columns="knee")).knee == 1  # saved before the knee


def test_the_knee_is_where_the_matmul_time_starts_to_grow():
    rows = np.arange(1, 17)
    rng = np.random.default_rng(0)

    def times(knee):
        seconds = 0.008 + 0.0011 * np.maximum(rows - knee, 0)
        return pd.DataFrame([{"round": r, "rows": m, "seconds": s * np.exp(rng.normal(0, 0.03))}
                             for r in range(5) for m, s in zip(rows, seconds)])

    assert speed_model.gemm_knee(times(4)) == 4
    summary = speed_model.knee_summary(times(4), 4)
    assert "(median of 5 rounds): 1 rows 8.0 ms," in summary and summary.endswith("; knee: 4 rows")
    assert speed_model.gemm_knee(times(1)) == 1
    one_bad_round = times(4)
    one_bad_round.loc[one_bad_round["round"] == 0, "seconds"] *= np.linspace(2, 1, 16).tolist()
    assert speed_model.gemm_knee(one_bad_round) == 4  # the median over rounds


def test_the_matmul_probe_times_vllms_own_kernels_on_a_models_shapes():
    config = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "vocab_size": 1000}
    assert speed_model.linear_shapes(config) == [(128, 64, 2), (64, 64, 2), (256, 64, 2), (64, 128, 2), (1000, 64, 1)]
    times = speed_model.gemm_times(config, rows=(1, 2, 4, 8), repeats=2, rounds=2)
    assert list(times["rows"]) == [1, 2, 4, 8] * 2 and (times["seconds"] > 0).all()
    assert speed_model.gemm_knee(times) in (1, 2, 4)
