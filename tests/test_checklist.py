"""The checklist is the speed model: its predictions, intervals, verdict wording, extrapolation flags, the roofline
cost model for a pair the kit did not measure, the VRAM check, and the widget that drives it."""

import dataclasses

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers import checklist, speed_model, vram  # noqa: E402
from helpers.models import TARGET_DIR, draft_dir  # noqa: E402
from helpers.widgets import Checklist  # noqa: E402

TALK = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "bfloat16")
CPU = checklist.Source("cpu", "CPU: test (2 cores)", "smollm2-135m-instruct", "draft-2l")
MEASURED = (str(TARGET_DIR), str(draft_dir("2l")), "float32")  # the offline models (make models): their configs
# Step costs (s): target 40 ms + 1 ms per token scored, draft 5 ms per step, 2 ms engine overhead per step
S = len(speed_model.STEP_PARAMS)  # the terms after the first 11 (T > 0, a pass's rising) are 0 here
COSTS = speed_model.Costs(np.r_[0.040, 0.001, 0.0, 0.005, 0.0002, 0.0, 0.0, 0.002, 0.001, 0.0, 0.0, np.zeros(S - 11)],
                          np.zeros((S, S)),
                          np.array([0.05, 0.0008, 0.0, 0.01, 0.0001, 0.0, 0.0, 0.0]), np.zeros((8, 8)))
TAUS = {("structured", 0.0): [2.6, 2.8, 2.4, 2.2, 2.9, 2.5, 2.7, 2.3], ("creative", 0.0): [1.5, 1.4, 1.6, 1.5],
        ("structured", 1.0): [1.3, 1.2, 1.25, 1.3], ("creative", 1.0): [1.05, 1.1, 1.0, 1.08]}


def measurements(source: checklist.Source = CPU, costs=COSTS) -> checklist.Measurements:
    acceptance = pd.DataFrame([
        {"category": c, "temperature": t, "method": m, "k": 4, "prompt_index": i, "prompt_tokens": 60,
         "output_tokens": 64, "tau": tau if m == "draft_model" else 1 + (tau - 1) / 4, "accepted": 10,
         "draft_tokens": 40, "drafted_steps": 20 if m == "draft_model" else 8, "verify_steps": 20}
        for (c, t), taus in TAUS.items() for m in ("draft_model", "ngram") for i, tau in enumerate(taus)])
    grid = pd.DataFrame([{"category": "structured", "temperature": 0.0, "method": m, "arm": m, "k": 4,
                          "prompt_tokens": 60, "output_tokens": 64, "speedup": 1.3, "speedup_ci_low": 1.2,
                          "speedup_ci_high": 1.4} for m in ("draft_model", "ngram")])
    long = pd.DataFrame([{"method": m, "arm": m, "k": 4, "prompt_length": n, "prompt_tokens": n, "output_tokens": 48,
                          "acceptance_rate": 0.3, "draft_fraction": 0.5, "request_tau": [1.8, 2.0, 2.2],
                          "speedup": 0.9, "speedup_ci_low": 0.85, "speedup_ci_high": 0.95,
                          "interval": "95% CI over 3 prompts"}
                         for m in ("draft_model", "ngram") for n in (128, 2000)])
    batch = pd.DataFrame([{"method": m, "arm": m, "concurrency": n, "prompt_tokens": 60, "output_tokens": 48,
                           "speedup": 1.1} for m in ("draft_model", "ngram") for n in (1, 8)])
    return checklist.Measurements(grid, long, batch, source, acceptance, costs, 4)


def answers(pair=MEASURED, **change) -> checklist.Answers:
    base = dict(workload="structured", temperature=0.0, prompt_tokens=60, concurrency=1, gpu_gb=96,
                target_config=pair[0], draft_config=pair[1], dtype=pair[2], output_tokens=64)
    return checklist.Answers(**{**base, **change})


def option(result: dict, method: str) -> dict:
    return next(o for o in result["options"] if o["method"] == method)


def by_hand(taus, prompt_tokens=60, output_tokens=64, k=4):
    """Latency speedup of one request per prompt, from COSTS by hand; geometric mean over the prompts."""
    ctx = prompt_tokens + output_tokens / 2
    target = lambda n: 0.040 + 0.001 * n  # noqa: E731
    base = 0.05 + 0.0008 * prompt_tokens + (output_tokens - 1) * target(1)
    spec_step = target(k + 1) + k * (0.005 + 0.0002) + 0.002
    spec = [0.05 + 0.0008 * prompt_tokens + 0.01 + 0.0001 * prompt_tokens + (output_tokens - 1) / t * spec_step
            for t in taus]
    assert ctx > 0
    return float(np.exp(np.mean(np.log([base / s for s in spec]))))


def test_structured_one_request_is_the_model_prediction_with_an_interval_over_prompts():
    result = checklist.recommend(answers(), measurements())
    best = result["best"]
    assert best["method"] == "draft_model" and best["quantity"] == "latency"
    assert best["speedup"] == pytest.approx(by_hand(TAUS[("structured", 0.0)]))
    assert best["low"] < best["speedup"] < best["high"] and best["low"] > 1
    assert result["verdict"].startswith("turn on draft_model: predicted") and "[" in result["verdict"]
    assert "latency" in result["verdict"] and "cpu profile" in result["verdict"]
    assert any("8 prompts" in r for r in best["reasons"]) and any("VRAM" in r for r in best["reasons"])
    assert not best["extrapolated"]


def test_a_loss_and_a_spanning_interval_are_worded_so():
    lost = checklist.recommend(answers(workload="creative", temperature=1.0), measurements())
    assert all(o["high"] < 1 for o in lost["options"]) and lost["verdict"].startswith("leave it off: every option")
    # two prompts far apart: an interval that spans 1 gives no clear gain, whatever the point estimate
    data = measurements()
    wide = data.acceptance.copy()
    wide.loc[(wide["category"] == "creative") & (wide["temperature"] == 0), "tau"] = [1.0, 3.2, 1.0, 3.2] * 2
    result = checklist.recommend(answers(workload="creative"), dataclasses.replace(data, acceptance=wide))
    assert result["best"]["low"] < 1 < result["best"]["high"]
    assert result["verdict"].startswith("no clear gain")


def test_longer_answers_amortise_the_prefill():
    short, long = (option(checklist.recommend(answers(prompt_tokens=1900, output_tokens=o), measurements()),
                          "draft_model")["speedup"] for o in (48, 1024))
    assert long > short


def test_every_input_outside_the_measured_range_is_flagged():
    result = checklist.recommend(answers(prompt_tokens=8000, output_tokens=2048, concurrency=64, temperature=0.5),
                                 measurements())
    flags = option(result, "draft_model")["extrapolated"]
    assert any("8000 prompt tokens" in f for f in flags) and any("2048 answer tokens" in f for f in flags)
    assert any("64 concurrent requests" in f for f in flags) and any("temperature 0.5" in f for f in flags)
    assert "Outside what was measured" in result["caveat"]


def test_concurrency_gives_a_throughput_prediction():
    result = checklist.recommend(answers(concurrency=4), measurements())
    draft = option(result, "draft_model")
    assert draft["quantity"] == "throughput" and "4 concurrent requests" in result["verdict"]
    # a step scoring 4 x 5 tokens costs more than at batch 1, so the gain shrinks with concurrency
    assert draft["speedup"] < option(checklist.recommend(answers(), measurements()), "draft_model")["speedup"]


def test_long_documents_take_05s_acceptance_at_the_nearest_length():
    result = checklist.recommend(answers(workload=checklist.LONG_DOCUMENT, prompt_tokens=1900, output_tokens=48),
                                 measurements())
    draft = option(result, "draft_model")
    assert any("3 documents of 2000 tokens" in r for r in draft["reasons"])
    assert (checklist._count(1, "document"), checklist._count(3, "prompt")) == ("1 document", "3 prompts")
    assert draft["measured"]["measured_in"] == "05"  # the kit measured these conditions: shown beside
    assert any(r.startswith("measured beside it (05") and "0.90x [0.85, 0.95]" in r for r in draft["reasons"])


def test_another_pair_gets_roofline_costs_never_the_cpu_curve():
    result = checklist.recommend(answers(pair=TALK, concurrency=16), measurements())
    draft = option(result, "draft_model")
    assert not draft["measured_pair"] and any("roofline" in r and "not measured" in r for r in draft["reasons"])
    assert "not measured" in result["verdict"] and "not on Llama-3.1-8B-Instruct + Llama-3.2-1B-Instruct" in result["verdict"]
    # the roofline's step is flat until compute-bound: 16 sequences cost what one does, unlike COSTS
    costs = checklist.roofline_costs(answers(pair=TALK))
    assert costs.step_s("baseline", 16, 4, 300) == pytest.approx(costs.step_s("baseline", 1, 4, 300), rel=0.05)
    target, draft_model = (vram.model_memory(c, "bfloat16") for c in TALK[:2])
    assert costs.draft(1, 0) / costs.target(1, 0) == pytest.approx(draft_model["weight_bytes"] / target["weight_bytes"])


def test_source_comes_from_the_rows():
    rows = pd.DataFrame([{"method": m, "hardware": "CPU: x", "profile": "cpu", "target": "smollm2-135m-instruct",
                          "draft": d} for m, d in [("draft_model", "draft-2l"), ("ngram", "prompt n-grams"),
                                                   ("baseline", None)]])
    assert checklist.source_of(rows, rows) == checklist.Source("cpu", "CPU: x", "smollm2-135m-instruct", "draft-2l")


def test_no_vram_headroom_rules_the_draft_out():
    result = checklist.recommend(answers(pair=TALK, gpu_gb=24, prompt_tokens=4096, concurrency=32), measurements())
    draft = option(result, "draft_model")
    assert not draft["fits"] and "does not fit" in draft["reasons"][-1]
    assert result["best"] is None or result["best"]["method"] == "ngram"


def test_unmeasured_workload_is_a_clear_error():
    with pytest.raises(ValueError, match="no measurement"):
        checklist.recommend(answers(workload="poetry"), measurements())


def test_widget_shows_the_verdict_of_a_source_beside_its_own():
    other = measurements()
    other = dataclasses.replace(other, acceptance=other.acceptance[other.acceptance["category"] == "structured"])
    widget = Checklist(measurements(), {"measured": MEASURED, "talk": TALK}, beside={"reference: elsewhere": other})
    expected = checklist.recommend(widget.answers(), other)["verdict"]
    assert f"Beside it, <b>reference: elsewhere</b>: {expected}" in widget.result.value
    widget.workload.value = "creative"  # measured here, not by the other source: said, not raised
    assert "<b>reference: elsewhere</b>: no verdict: no measurement" in widget.result.value


def test_widget_is_driven_by_its_values():
    widget = Checklist(measurements(), {"measured": MEASURED, "talk": TALK})
    assert widget.recommendation["verdict"].startswith("turn on draft_model")
    assert str(CPU) in widget.result.value  # where the numbers come from is on screen
    widget.output_tokens.value = 1024
    assert widget.answers().output_tokens == 1024
    widget.workload.value, widget.temperature.value = "creative", 1.0
    assert widget.recommendation["verdict"].startswith("leave it off")
    assert "predicted" in widget.result.value
    widget.concurrency.value = 16
    assert "throughput" in widget.result.value
    widget.pair.value = "talk"
    assert "roofline" in widget.result.value
    widget.gpu_gb.value, widget.prompt_tokens.value, widget.concurrency.value = 16, 8192, 64
    assert all(not o["fits"] for o in widget.recommendation["options"])
    assert widget.recommendation["verdict"].startswith("leave it off")
    assert all(not c.continuous_update
               for c in (widget.temperature, widget.prompt_tokens, widget.output_tokens, widget.concurrency))


def test_newer_methods_are_predicted_where_measured_and_left_out_with_a_reason_elsewhere():
    """EAGLE-3 and suffix decoding (04 only, one request at a time): predicted from their own step-cost terms on the
    measured pair, flagged beyond one request, and left out, saying why, where the kit has no measurement or no
    cost term for them (long documents; a speed model fitted before them; the EAGLE-3 head of another pair)."""
    data = measurements()
    newer = pd.concat([data.acceptance[data.acceptance["method"] == "draft_model"].assign(method=m) for m in
                       ("eagle3", "suffix")], ignore_index=True)
    acceptance = pd.concat([data.acceptance, newer], ignore_index=True)
    step = COSTS.step.copy()
    step[9:11] = [0.001, 0.0005]  # an EAGLE-3 draft pass 1 ms, suffix's tree 0.5 ms a step
    costs = dataclasses.replace(COSTS, step=step, methods=("baseline", "draft_model", "ngram", "eagle3", "suffix"))
    with_terms = dataclasses.replace(data, acceptance=acceptance, costs=costs)
    result = checklist.recommend(answers(), with_terms)
    eagle, draft = option(result, "eagle3"), option(result, "draft_model")
    assert eagle["speedup"] > draft["speedup"]  # same acceptance, a cheaper draft pass
    assert "suffix" in {o["method"] for o in result["options"]} and "Not predicted" not in result["caveat"]
    busy = checklist.recommend(answers(concurrency=4), with_terms)
    assert any("eagle3 at 4 concurrent requests" in r for r in option(busy, "eagle3")["extrapolated"])
    old_model = checklist.recommend(answers(), dataclasses.replace(with_terms, costs=COSTS))
    assert {o["method"] for o in old_model["options"]} == {"draft_model", "ngram"}
    assert "eagle3: no step cost for it in the speed model" in old_model["caveat"]
    rag = checklist.recommend(answers(workload=checklist.LONG_DOCUMENT, prompt_tokens=1900, output_tokens=48),
                              with_terms)
    assert "eagle3: not measured on long documents" in rag["caveat"]
    talk = checklist.recommend(answers(pair=TALK), with_terms)
    assert "eagle3" not in {o["method"] for o in talk["options"]} and "own EAGLE-3 head only" in talk["caveat"]


def test_a_speedup_without_an_interval_says_so_instead_of_printing_nan():
    assert checklist.stated_speedup({"speedup": 0.84, "low": float("nan"), "high": float("nan")}) == \
        "0.84x (no interval)"
    assert checklist.stated_speedup({"speedup": 1.18, "low": 0.97, "high": 1.44}) == "1.18x [0.97, 1.44]"
