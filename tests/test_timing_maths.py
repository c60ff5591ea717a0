from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from helpers.timing import category_verdict, request_timing, sampling_params, speedup_interval, summarize, verdict


def fake_output(tokens, arrival_latency, scheduled, first, last, prompt=10):
    metrics = SimpleNamespace(first_token_latency=arrival_latency, scheduled_ts=scheduled,
                              first_token_ts=first, last_token_ts=last)
    return SimpleNamespace(metrics=metrics, prompt_token_ids=list(range(prompt)),
                           outputs=[SimpleNamespace(token_ids=list(range(tokens)))])


def test_request_timing_from_vllm_timestamps():
    t = request_timing(fake_output(tokens=11, arrival_latency=0.5, scheduled=100.1, first=100.4, last=101.4))
    assert t["ttft_s"] == 0.5
    assert t["prefill_s"] == pytest.approx(0.3)
    assert t["decode_s"] == pytest.approx(1.0)
    assert t["tpot_s"] == pytest.approx(0.1)
    assert t["e2e_s"] == pytest.approx(1.5)
    assert (t["prompt_tokens"], t["output_tokens"]) == (10, 11)


def test_single_token_has_no_tpot():
    assert np.isnan(request_timing(fake_output(1, 0.2, 0, 0.2, 0.2))["tpot_s"])


def test_three_pairs_give_a_range_not_a_ci():
    result = speedup_interval([1.41, 1.57, 1.62])
    assert "95%" not in result["interval"] and "range of 3 pairs" in result["interval"]
    assert (result["low"], result["speedup"], result["high"]) == (1.41, 1.57, 1.62)
    assert verdict({"interval": result["interval"], "speedup_ci_low": 1.41, "speedup_ci_high": 1.62}) == \
        "too few repetitions to call"


def test_interval_over_prompts_covers_the_true_median_with_prompt_effects():
    """Prompts differ (random effect, sd 0.25 in log speedup); repetitions add noise (sd 0.05). The true median
    speedup over prompts is exp(0.3). Over 1,000 simulated experiments of 6 prompts x 3 repetitions the interval
    must cover it at least 90% of the time."""
    rng = np.random.default_rng(7)
    prompts = np.repeat(np.arange(6), 3)
    covered = 0
    for _ in range(1000):
        effects = rng.normal(0.3, 0.25, 6)
        ratios = np.exp(effects[prompts] + rng.normal(0, 0.05, len(prompts)))
        result = speedup_interval(ratios, prompts)
        covered += result["low"] <= np.exp(0.3) <= result["high"]
    assert result["interval"] == "95% CI over 6 prompts"
    assert covered / 1000 >= 0.9, covered


def test_pooling_pairs_across_prompts_would_undercover():
    """The old interval (bootstrap over all pairs as if independent) on the same simulation: a control that
    shows why the pairs are grouped by prompt."""
    rng = np.random.default_rng(7)
    prompts = np.repeat(np.arange(6), 3)
    covered = 0
    for _ in range(300):
        ratios = np.exp(rng.normal(0.3, 0.25, 6)[prompts] + rng.normal(0, 0.05, len(prompts)))
        boots = [np.median(rng.choice(ratios, len(ratios))) for _ in range(300)]
        covered += np.percentile(boots, 2.5) <= np.exp(0.3) <= np.percentile(boots, 97.5)
    assert covered / 300 < 0.9


def test_few_prompts_get_an_interval_for_those_prompts_only():
    result = speedup_interval([1.5, 1.6, 1.55, 1.2, 1.25, 1.22], [0, 0, 0, 1, 1, 1])
    assert result["interval"] == "95% CI over repetitions, for these 2 prompt(s)"
    assert result["low"] <= result["speedup"] <= result["high"]
    assert abs(result["speedup"] - np.sqrt(1.55 * 1.22)) < 1e-9


def test_verdicts():
    ci = "95% CI over 6 prompts"
    assert verdict({"interval": ci, "speedup_ci_low": 1.1, "speedup_ci_high": 1.3}) == "PAID"
    assert verdict({"interval": ci, "speedup_ci_low": 0.7, "speedup_ci_high": 0.9}) == "LOST"
    assert verdict({"interval": ci, "speedup_ci_low": 0.9, "speedup_ci_high": 1.3}) == "no clear effect"
    assert verdict({"interval": ci, "speedup_ci_low": 1.1, "speedup_ci_high": 1.3, "repetitions": 1}) == \
        "too few repetitions to call"


def test_invalid_sampling_is_refused():
    with pytest.raises(ValueError, match="temperature"):
        sampling_params(temperature=-0.1)
    with pytest.raises(ValueError, match="max_tokens"):
        sampling_params(max_tokens=0)


def _rows(arm, seconds, reps=2, prompts=3, **extra):
    return [{"hardware": "h", "profile": "p", "target": "t", "draft": "d", "method": "m", "k": 4,
             "temperature": 0.0, "repetitions": reps, "batch": 1, "arm": arm, "repetition": r,
             "prompt_index": i, "prompt_tokens": 20, "output_tokens": 10, "e2e_s": seconds, "tpot_s": seconds / 10, "ttft_s": 0.01,
             "decode_s": seconds - 0.01,
             "run_drafts": extra.get("drafts", 0), "run_draft_tokens": extra.get("tokens", 0),
             "run_accepted": extra.get("accepted", 0), "run_per_position": extra.get("per_pos", [])} for r in range(reps) for i in range(prompts)]


def test_summarize_speedup_and_acceptance():
    runs = pd.DataFrame(_rows("baseline", 2.0) + _rows("spec", 1.0, drafts=4, tokens=16, accepted=8, per_pos=[4, 2, 1, 1]))
    s = summarize(runs).set_index("arm")
    assert s.loc["baseline", "speedup"] == 1.0
    assert s.loc["spec", "speedup"] == 2.0
    assert s.loc["spec", "speedup_ci_low"] == s.loc["spec", "speedup_ci_high"] == 2.0
    # counters are per run (repetition), not per prompt row: 2 runs x (4 drafts, 16 tokens, 8 accepted)
    assert s.loc["spec", "acceptance_rate"] == 0.5
    assert s.loc["spec", "mean_acceptance_length"] == 3.0
    assert s.loc["spec", "tok_per_s"] == 10.0
    assert s.loc["spec", "pairs"] == 6
    assert s.loc["spec", "position_acceptance"] == [1.0, 0.5, 0.25, 0.25]  # (2 runs x [4, 2, 1, 1]) / 8 drafts
    assert s.loc["baseline", "position_acceptance"] == []
    assert s.loc["spec", "prompt_speedups"] == [2.0] * runs["prompt_index"].nunique()  # one per prompt, in order


def test_decode_speedup_leaves_ttft_out_and_c_eff_is_recovered():
    # Baseline: TTFT 1 s, then 9 tokens at 0.1 s each. Speculative: same TTFT, 9 tokens in 3 verify steps of
    # 0.2 s each, k = 4: a step costs target_step * (1 + k * c_eff) with c_eff = 0.25.
    def rows(arm, tpot, decode, drafts):
        return [{**r, "ttft_s": 1.0, "tpot_s": tpot, "decode_s": decode, "e2e_s": 1.0 + decode}
                for r in _rows(arm, 1.0, drafts=drafts, tokens=4 * drafts, accepted=2 * drafts)]
    runs = pd.DataFrame(rows("baseline", 0.1, 0.9, 0) + rows("spec", 0.6 / 9, 0.6, 9))  # 3 prompts x 3 steps per run
    s = summarize(runs).set_index("arm")
    assert s.loc["spec", "decode_speedup"] == pytest.approx(1.5)
    assert s.loc["spec", "speedup"] == pytest.approx(1.9 / 1.6)  # end to end, TTFT included: less than decode alone
    assert s.loc["spec", "tokens_per_verify_step"] == pytest.approx(3.0)
    assert s.loc["spec", "c_eff"] == pytest.approx(0.25)
    assert np.isnan(s.loc["baseline", "c_eff"])
    # The speed model's inputs: time per engine step of each arm, and of the baseline it was paired with
    assert s.loc["spec", "step_ms"] == pytest.approx(200.0)
    assert s.loc["spec", "baseline_step_ms"] == s.loc["baseline", "step_ms"] == pytest.approx(100.0)
    assert s.loc["spec", "draft_fraction"] == pytest.approx(1.0)


def test_steps_without_drafts_count_as_decode_steps():
    # n-gram, k = 4: per request 5 steps with a full draft accepted (25 tokens) and 15 steps without a draft
    # (15 tokens): 40 decode tokens in 20 steps, each step 1.05 baseline steps. vLLM counts 5 drafts, not 20.
    def rows(arm, tpot, decode, drafts, accepted):
        return [{**r, "output_tokens": 41, "ttft_s": 1.0, "tpot_s": tpot, "decode_s": decode, "e2e_s": 1.0 + decode}
                for r in _rows(arm, 1.0, reps=1, prompts=1, drafts=drafts, tokens=4 * drafts, accepted=accepted)]
    runs = pd.DataFrame(rows("baseline", 0.1, 4.0, 0, 0) + rows("spec", 20 * 0.105 / 40, 20 * 0.105, 5, 20))
    s = summarize(runs).set_index("arm")
    assert s.loc["spec", "mean_acceptance_length"] == pytest.approx(5.0)  # per drafting step
    assert s.loc["spec", "tokens_per_verify_step"] == pytest.approx(2.0)  # per decode step: 40 / 20
    assert s.loc["spec", "c_eff"] == pytest.approx(0.05 / 4)
    assert s.loc["spec", "draft_fraction"] == pytest.approx(5 / 20)  # the share of steps that verified a draft


def test_warm_up_rounds_run_only_on_engines_that_have_not_run_that_kind_of_request(monkeypatch):
    from helpers import timing
    from helpers.engines import EngineSpec
    from helpers.metrics import SpecCounters

    engines, calls = {}, []

    def get_engine(spec):
        return engines.setdefault(spec, SimpleNamespace())

    def run(spec, prompts, params, concurrency=None):
        calls.append((spec.method, params.temperature))
        outputs = [fake_output(5, 0.1, 0, 0.1, 0.5) for _ in prompts]
        for output in outputs:
            output.outputs[0].text = "x"
        return {"outputs": outputs, "wall_s": 1.0,
                "counters": SpecCounters()}

    monkeypatch.setattr(timing, "get_engine", get_engine)
    monkeypatch.setattr(timing, "run", run)
    monkeypatch.setattr(timing, "describe_spec", lambda spec: {"arm": spec.method})
    monkeypatch.setattr(timing, "sampling_params", lambda temperature, max_tokens, **_: SimpleNamespace(
        temperature=temperature))
    base, arm = EngineSpec("cpu"), EngineSpec("cpu", "draft_model")
    first = timing.paired_runs(base, [arm], ["a", "b"], repetitions=2)
    assert len(calls) == 6 and len(first) == 8  # a warm-up round on both fresh engines, then 2 measured rounds
    calls.clear()
    timing.paired_runs(base, [arm], ["a"], repetitions=2)
    assert len(calls) == 4  # both warm for greedy, unbatched requests: no warm-up round
    calls.clear()
    timing.paired_runs(base, [arm], ["a"], temperature=1.0, repetitions=2)
    assert len(calls) == 6  # sampling is a new kind of request: warm-up again
    engines.pop(arm)  # the arm's engine was shut down and will be rebuilt
    calls.clear()
    timing.paired_runs(base, [arm], ["a"], repetitions=1)
    assert calls == [("draft_model", 0.0), ("draft_model", 0.0), ("baseline", 0.0)]  # round 2 rotates the order


def test_a_category_verdict_needs_an_interval_over_five_prompts():
    row = {"speedup_ci_low": 1.1, "speedup_ci_high": 1.3, "repetitions": 3}
    assert category_verdict({**row, "interval": "95% CI over 8 prompts"}) == "PAID"
    assert category_verdict({**row, "interval": "95% CI over 4 prompts"}).startswith("no category verdict: [1.10, 1.30]")
    assert "for these 2 prompt(s)" in category_verdict({**row, "interval": "95% CI over repetitions, for these 2 prompt(s)"})
