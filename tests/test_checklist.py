import dataclasses

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers import checklist  # noqa: E402
from helpers.widgets import Checklist  # noqa: E402

TALK = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "bfloat16")
CPU = checklist.Source("cpu", "CPU: test (2 cores)", "smollm2-135m-instruct", "draft-2l")

# 05: per method and prompt length, (baseline TTFT s, baseline TPOT ms, speculative TTFT s, decode-only speedup)
LONG = {"draft_model": {128: (0.05, 20, 0.06, 1.5), 1024: (0.5, 22, 0.55, 1.4), 2048: (2.0, 25, 2.1, 1.2)},
        "ngram": {128: (0.05, 20, 0.05, 1.1), 2048: (1.2, 25, 1.2, 1.3)}}


def latency_speedup(ttft_base_s, tpot_base_ms, ttft_spec_s, decode, output_tokens=256):
    """The checklist's latency model, by hand: TTFT + (O - 1) × TPOT, decode TPOT divided by D."""
    baseline = 1000 * ttft_base_s + (output_tokens - 1) * tpot_base_ms
    return baseline / (1000 * ttft_spec_s + (output_tokens - 1) * tpot_base_ms / decode)


def measurements(source: checklist.Source = CPU) -> checklist.Measurements:
    grid = pd.DataFrame([
        {"category": c, "temperature": t, "method": m, "speedup": s, "speedup_ci_low": s - 0.1,
         "speedup_ci_high": s + 0.1, "decode_speedup": d, "decode_ci_low": d - 0.1, "decode_ci_high": d + 0.1,
         "acceptance_rate": a}
        for c, t, m, s, d, a in [
            ("structured", 0.0, "draft_model", 1.6, 1.8, 0.7), ("structured", 1.0, "draft_model", 1.2, 1.3, 0.5),
            ("creative", 0.0, "draft_model", 1.1, 1.15, 0.3), ("creative", 1.0, "draft_model", 0.8, 0.85, 0.1),
            ("structured", 0.0, "ngram", 1.1, 1.15, 0.2), ("structured", 1.0, "ngram", 1.0, 1.0, 0.1),
            ("creative", 0.0, "ngram", 1.0, 1.0, 0.1), ("creative", 1.0, "ngram", 0.97, 0.97, 0.0)]])
    long = pd.DataFrame([
        row for m, lengths in LONG.items() for n, (ttft_b, tpot_b, ttft_s, d) in lengths.items() for row in (
            {"arm": "baseline", "vs": f"{m} k=4", "method": "baseline", "prompt_length": n, "ttft_s": ttft_b,
             "tpot_ms": tpot_b, "decode_speedup": 1.0},
            {"arm": f"{m} k=4", "vs": f"{m} k=4", "method": m, "prompt_length": n, "ttft_s": ttft_s,
             "tpot_ms": tpot_b / d, "decode_speedup": d})])
    batch = pd.DataFrame([{"method": m, "concurrency": n, "speedup": s} for m, n, s in [
        ("draft_model", 1, 1.5), ("draft_model", 4, 1.2), ("draft_model", 16, 0.75),
        ("ngram", 1, 1.1), ("ngram", 16, 1.0)]])
    return checklist.Measurements(grid, long, batch, source)


def answers(**change) -> checklist.Answers:
    base = dict(workload="structured", temperature=0.0, prompt_tokens=128, concurrency=1, gpu_gb=96,
                target_config=TALK[0], draft_config=TALK[1], dtype="bfloat16")
    return checklist.Answers(**{**base, **change})


def option(result: dict, method: str) -> dict:
    return next(o for o in result["options"] if o["method"] == method)


def test_structured_small_batch_short_prompt_turns_it_on():
    result = checklist.recommend(answers(), measurements())
    assert result["best"]["method"] == "draft_model" and result["best"]["quantity"] == "latency"
    # at the shortest prompt 05's scaling is 1: D is 04's decode-only speedup, 1.8
    assert result["best"]["speedup"] == pytest.approx(latency_speedup(0.05, 20, 0.06, 1.8))
    assert option(result, "ngram")["speedup"] == pytest.approx(latency_speedup(0.05, 20, 0.05, 1.15))
    assert result["verdict"].startswith("turn on draft_model") and "latency" in result["verdict"]
    assert any("04" in r for r in result["best"]["reasons"]) and any("VRAM" in r for r in result["best"]["reasons"])


def test_latency_combines_prefill_and_decode_at_the_prompt_length():
    at_1024 = option(checklist.recommend(answers(prompt_tokens=1024), measurements()), "draft_model")
    assert at_1024["speedup"] == pytest.approx(latency_speedup(0.5, 22, 0.55, 1.8 * 1.4 / 1.5))
    # halfway between 128 and 1,024 tokens every 05 value is the mean of the two
    at_576 = option(checklist.recommend(answers(prompt_tokens=576), measurements()), "draft_model")
    assert at_576["speedup"] == pytest.approx(latency_speedup(0.275, 21, 0.305, 1.8 * 1.45 / 1.5))
    assert not any("extrapolated" in r for r in at_576["reasons"])


def test_longer_answers_amortise_the_prefill():
    short, long = (option(checklist.recommend(answers(prompt_tokens=1900, output_tokens=o), measurements()),
                          "draft_model") for o in (48, 1024))
    # 1,900 tokens lies between the 1,024- and 2,048-token measurements of 05
    at = (1900 - 1024) / (2048 - 1024)
    ttft_base, tpot, ttft_spec = 0.5 + at * (2.0 - 0.5), 22 + at * (25 - 22), 0.55 + at * (2.1 - 0.55)
    decode = 1.8 * (1.4 + at * (1.2 - 1.4)) / 1.5
    assert decode > 1 and 1000 * ttft_base > 47 * tpot  # at 48 answer tokens prefill dominates
    assert short["speedup"] == pytest.approx(latency_speedup(ttft_base, tpot, ttft_spec, decode, 48))
    assert long["speedup"] == pytest.approx(latency_speedup(ttft_base, tpot, ttft_spec, decode, 1024))
    assert long["speedup"] > short["speedup"]


def test_outside_the_measured_range_is_extrapolated():
    busy = option(checklist.recommend(answers(concurrency=64), measurements()), "draft_model")
    assert busy["speedup"] == pytest.approx(0.75)  # held at 16 requests; structured T=0 needs no adjustment
    assert any("extrapolated" in r and "16" in r for r in busy["reasons"])
    long = option(checklist.recommend(answers(prompt_tokens=8192), measurements()), "draft_model")
    assert long["speedup"] == pytest.approx(latency_speedup(2.0, 25, 2.1, 1.8 * 1.2 / 1.5))
    assert any("extrapolated" in r and "2048" in r for r in long["reasons"])


def test_concurrency_predicts_throughput_adjusted_for_the_workload():
    result = checklist.recommend(answers(prompt_tokens=1024, concurrency=4), measurements())
    draft = option(result, "draft_model")
    assert draft["quantity"] == "throughput" and draft["speedup"] == pytest.approx(1.2)
    assert "throughput" in result["verdict"] and "4 concurrent requests" in result["verdict"]
    assert any("the workload 06 measured, no scaling" in r for r in draft["reasons"])  # structured, T=0: as 06
    high = checklist.recommend(answers(workload="creative", temperature=0.9, concurrency=16), measurements())
    assert option(high, "draft_model")["speedup"] == pytest.approx(0.75 * 0.8 / 1.6)
    assert option(high, "ngram")["speedup"] == pytest.approx(1.0 * 0.97 / 1.1)
    assert high["verdict"].startswith("leave it off")
    assert any("assumed" in r for r in option(high, "ngram")["reasons"])
    assert not any("no scaling" in r for r in option(high, "ngram")["reasons"])


def test_verdict_names_where_the_speedups_were_measured():
    on_cpu = checklist.recommend(answers(), measurements())
    assert "cpu profile" in on_cpu["verdict"] and "CPU: test (2 cores)" in on_cpu["verdict"]
    assert "not on Llama-3.1-8B-Instruct + Llama-3.2-1B-Instruct" in on_cpu["verdict"]
    talk = checklist.Source("gpu-talk", "H100", "Llama-3.1-8B-Instruct", "Llama-3.2-1B-Instruct")
    on_gpu = checklist.recommend(answers(), measurements(talk))
    assert "gpu-talk profile" in on_gpu["verdict"] and "not on" not in on_gpu["verdict"]


def test_source_comes_from_the_rows():
    rows = pd.DataFrame([{"method": m, "hardware": "CPU: x", "profile": "cpu", "target": "smollm2-135m-instruct",
                          "draft": d} for m, d in [("draft_model", "draft-2l"), ("ngram", "prompt n-grams"),
                                                   ("baseline", None)]])
    assert checklist.source_of(rows, rows) == checklist.Source("cpu", "CPU: x", "smollm2-135m-instruct", "draft-2l")


def test_no_vram_headroom_rules_the_draft_out():
    result = checklist.recommend(answers(gpu_gb=24, prompt_tokens=4096, concurrency=32), measurements())
    draft = option(result, "draft_model")
    assert not draft["fits"] and "does not fit" in draft["reasons"][-1]
    assert result["best"] is None or result["best"]["method"] == "ngram"


def test_unmeasured_workload_is_a_clear_error():
    with pytest.raises(ValueError, match="no measurement"):
        checklist.recommend(answers(workload="poetry"), measurements())


def test_widget_shows_the_verdict_of_a_source_beside_its_own():
    other = measurements()
    other = dataclasses.replace(other, grid=other.grid[other.grid["category"] == "structured"])
    widget = Checklist(measurements(), {"talk": TALK}, beside={"reference: elsewhere": other})
    expected = checklist.recommend(widget.answers(), other)["verdict"]
    assert f"Beside it, <b>reference: elsewhere</b>: {expected}" in widget.result.value
    widget.workload.value = "creative"  # measured here, not by the other source: said, not raised
    assert "<b>reference: elsewhere</b>: no verdict: no measurement" in widget.result.value


def test_widget_is_driven_by_its_values():
    widget = Checklist(measurements(), {"talk": TALK})
    assert widget.recommendation["verdict"].startswith("turn on draft_model")
    assert str(CPU) in widget.result.value  # where the speedups come from is on screen
    widget.output_tokens.value = 1024
    assert widget.answers().output_tokens == 1024
    widget.workload.value, widget.temperature.value, widget.concurrency.value = "creative", 1.0, 16
    assert widget.recommendation["best"]["method"] == "ngram"
    assert "ngram" in widget.result.value and "predicted" in widget.result.value and "throughput" in widget.result.value
    widget.gpu_gb.value, widget.prompt_tokens.value, widget.concurrency.value = 16, 8192, 64
    assert all(not o["fits"] for o in widget.recommendation["options"])
    assert widget.recommendation["verdict"].startswith("leave it off")
    assert all(not c.continuous_update
               for c in (widget.temperature, widget.prompt_tokens, widget.output_tokens, widget.concurrency))
