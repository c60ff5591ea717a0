import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers import checklist  # noqa: E402
from helpers.widgets import Checklist  # noqa: E402

TALK = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "bfloat16")


def measurements() -> checklist.Measurements:
    grid = pd.DataFrame([
        {"category": c, "temperature": t, "method": m, "speedup": s, "speedup_ci_low": s - 0.1,
         "speedup_ci_high": s + 0.1, "acceptance_rate": a}
        for c, t, m, s, a in [
            ("structured", 0.0, "draft_model", 1.6, 0.7), ("structured", 1.0, "draft_model", 1.2, 0.5),
            ("creative", 0.0, "draft_model", 1.1, 0.3), ("creative", 1.0, "draft_model", 0.8, 0.1),
            ("structured", 0.0, "ngram", 1.1, 0.2), ("structured", 1.0, "ngram", 1.0, 0.1),
            ("creative", 0.0, "ngram", 1.0, 0.1), ("creative", 1.0, "ngram", 0.97, 0.0)]])
    long = pd.DataFrame([{"method": m, "prompt_length": n, "speedup": s} for m, n, s in [
        ("draft_model", 128, 1.5), ("draft_model", 1024, 1.2), ("draft_model", 4096, 1.05),
        ("ngram", 128, 1.1), ("ngram", 4096, 1.3)]])
    batch = pd.DataFrame([{"method": m, "concurrency": n, "speedup": s} for m, n, s in [
        ("draft_model", 1, 1.5), ("draft_model", 4, 1.2), ("draft_model", 16, 0.75),
        ("ngram", 1, 1.1), ("ngram", 16, 1.0)]])
    return checklist.Measurements(grid, long, batch)


def answers(**change) -> checklist.Answers:
    base = dict(workload="structured", temperature=0.0, prompt_tokens=128, concurrency=1, gpu_gb=96,
                target_config=TALK[0], draft_config=TALK[1], dtype="bfloat16")
    return checklist.Answers(**{**base, **change})


def test_structured_small_batch_short_prompt_turns_it_on():
    result = checklist.recommend(answers(), measurements())
    assert result["best"]["method"] == "draft_model"
    assert result["best"]["speedup"] == pytest.approx(1.6)  # both relative factors are 1 at the smallest points
    assert result["verdict"].startswith("turn on draft_model")
    assert any("04" in r for r in result["best"]["reasons"]) and any("VRAM" in r for r in result["best"]["reasons"])


def test_factors_come_from_the_measured_curves():
    result = checklist.recommend(answers(prompt_tokens=1024, concurrency=4), measurements())
    draft = next(o for o in result["options"] if o["method"] == "draft_model")
    assert draft["speedup"] == pytest.approx(1.6 * (1.2 / 1.5) * (1.2 / 1.5))
    high = checklist.recommend(answers(workload="creative", temperature=0.9, concurrency=16), measurements())
    assert high["verdict"].startswith("no clear gain") or high["verdict"].startswith("leave it off")
    assert next(o for o in high["options"] if o["method"] == "draft_model")["speedup"] == pytest.approx(0.8 * 0.5)


def test_no_vram_headroom_rules_the_draft_out():
    result = checklist.recommend(answers(gpu_gb=24, prompt_tokens=4096, concurrency=32), measurements())
    draft = next(o for o in result["options"] if o["method"] == "draft_model")
    assert not draft["fits"] and "does not fit" in draft["reasons"][-1]
    assert result["best"] is None or result["best"]["method"] == "ngram"


def test_unmeasured_workload_is_a_clear_error():
    with pytest.raises(ValueError, match="no measurement"):
        checklist.recommend(answers(workload="poetry"), measurements())


def test_widget_is_driven_by_its_values():
    widget = Checklist(measurements(), {"talk": TALK})
    assert widget.recommendation["verdict"].startswith("turn on draft_model")
    widget.workload.value, widget.temperature.value, widget.concurrency.value = "creative", 1.0, 16
    assert widget.recommendation["best"]["method"] == "ngram"
    assert "ngram" in widget.result.value and "predicted" in widget.result.value
    widget.gpu_gb.value, widget.prompt_tokens.value, widget.concurrency.value = 16, 8192, 64
    assert all(not o["fits"] for o in widget.recommendation["options"])
    assert widget.recommendation["verdict"].startswith("leave it off")
    assert all(not c.continuous_update for c in (widget.temperature, widget.prompt_tokens, widget.concurrency))
