from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from helpers.timing import bootstrap_ci, request_timing, sampling_params, summarize


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


def test_bootstrap_ci_brackets_the_median_and_shrinks_with_data():
    rng = np.random.default_rng(1)
    small, large = rng.normal(1.5, 0.2, 20), rng.normal(1.5, 0.2, 2000)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s <= np.median(small) <= hi_s
    assert lo_l < 1.5 < hi_l
    assert hi_l - lo_l < hi_s - lo_s


def test_bootstrap_of_constant_is_that_constant():
    assert bootstrap_ci([2.0] * 10) == (2.0, 2.0)


def test_invalid_sampling_is_refused():
    with pytest.raises(ValueError, match="temperature"):
        sampling_params(temperature=-0.1)
    with pytest.raises(ValueError, match="max_tokens"):
        sampling_params(max_tokens=0)


def _rows(arm, seconds, reps=2, prompts=3, **extra):
    return [{"hardware": "h", "profile": "p", "target": "t", "draft": "d", "method": "m", "k": 4,
             "temperature": 0.0, "repetitions": reps, "batch": 1, "arm": arm, "repetition": r,
             "prompt_index": i, "output_tokens": 10, "e2e_s": seconds, "tpot_s": seconds / 10, "ttft_s": 0.01,
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
