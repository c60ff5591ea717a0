"""The shipped reference results match the kit's inputs, and the modes pick what they say."""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import results


def test_reference_is_not_stale():
    reasons = results.stale_reasons("cpu")
    assert not reasons, "re-measure with `make reference`: " + "; ".join(reasons)


def test_a_changed_input_makes_the_reference_stale(tmp_path, monkeypatch):
    record = results.provenance("cpu")
    if record is None:
        pytest.skip("no reference shipped: test_reference_is_not_stale fails for that")
    shutil.copytree(results.ROOT / "data" / "prompts", tmp_path / "data" / "prompts")
    (tmp_path / "drafts").mkdir()
    for name in results.INPUTS:
        if name.startswith("drafts/"):
            (tmp_path / name).write_text((results.ROOT / name).read_text())
    assert results.input_hashes(tmp_path) == record["inputs"]
    with (tmp_path / "data" / "prompts" / "suite.jsonl").open("a") as handle:
        handle.write('{"id": "extra"}\n')
    assert results.input_hashes(tmp_path)["data/prompts"] != record["inputs"]["data/prompts"]


def test_reference_carries_provenance_and_rows():
    record = results.provenance("cpu")
    if record is None:
        pytest.skip("no reference shipped: test_reference_is_not_stale fails for that")
    assert record["mode"] == "full" and record["vllm"].startswith("vllm") and record["hardware"]
    from helpers.hardware import FEATURES

    # every shipped number names its machine class
    assert record["cpu_features"] and set(record["cpu_features"]) <= {name for name, _ in FEATURES}
    for name in ("04_structured_vs_creative", "05_long_context", "06_concurrency"):
        frame = results.load_reference(name)
        assert frame is not None and len(frame), name
        assert {"hardware", "profile", "repetitions"} <= set(frame.columns), name


@pytest.mark.parametrize("env, expected", [
    ({"SPECDEC_MODE": "full"}, "full 3"), ({"SPECDEC_MODE": "workshop"}, "workshop 2"),
    ({"SPECDEC_FAST": "1"}, "fast 1"), ({}, "workshop 2"), ({"SPECDEC_MODE": "fast", "SPECDEC_FAST": "0"}, "fast 1")])
def test_one_variable_sets_the_mode(env, expected):
    clean = {k: v for k, v in os.environ.items() if k not in ("SPECDEC_MODE", "SPECDEC_FAST")}
    code = "from helpers import fast; print(fast.MODE, fast.pick(3, 1, workshop=2))"
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == expected


def test_an_unknown_mode_is_refused():
    code = "import helpers.fast"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SPECDEC_MODE": "quick"},
                         capture_output=True, text=True)
    assert out.returncode != 0 and "choose one of fast, workshop, full" in out.stderr


def test_the_checklist_and_browser_open_from_the_reference():
    from helpers import checklist
    from helpers.profiles import get_profile
    from helpers.widgets import Checklist, ResultsBrowser

    profile = get_profile("cpu")
    data = checklist.reference_measurements(profile)
    if data is None:
        pytest.skip("no reference shipped: test_reference_is_not_stale fails for that")
    widget = Checklist(data, checklist.model_pairs(profile))
    assert "cpu profile" in widget.result.value and widget.recommendation["options"]
    grid = results.load_reference("04_structured_vs_creative")
    browser = ResultsBrowser(grid[grid["method"] == "draft_model"], source=results.reference_label())
    assert "reference:" in browser.table.value and len(browser.k.options) >= 3


def test_the_reference_label_names_the_machine_class():
    label = results.reference_label("cpu")
    features = results.provenance("cpu")["cpu_features"]
    assert all(feature in label for feature in features), label


def _reference_model():
    from helpers import checklist
    from helpers.profiles import get_profile

    profile = get_profile("cpu")
    data = checklist.reference_measurements(profile)
    if data is None:
        pytest.skip("no reference shipped: test_reference_is_not_stale fails for that")
    return profile, data


def test_the_reference_ships_its_speed_model_and_held_out_check():
    from helpers import speed_model

    _reference_model()
    held = results.load_reference("06_held_out")
    grid, long, batch = (results.load_reference(n) for n in ("04_structured_vs_creative", "05_long_context",
                                                              "06_concurrency"))
    points = speed_model.points(grid, long, batch[~batch["arm"].str.contains("by batch size")])
    # the split is the fixed rule, and every held-out speculative point has a row
    expected = set(points[~points["fit"] & points["method"].isin(speed_model.SPECULATIVE)]["point"])
    assert set(held["point"]) == expected and len(expected) >= 20
    assert ((held["low"] <= held["predicted"]) & (held["predicted"] <= held["high"])).all()
    assert held["inside"].equals((held["low"] <= held["measured"]) & (held["measured"] <= held["high"]))


def test_the_checklist_agrees_with_the_kits_measurements_where_it_measured():
    """Issue: the checklist said "turn on" where the kit had measured a loss. Every scenario of 06 with a
    measurement beside it: the predicted interval (for the true speedup) overlaps the measured one (for the
    measurement, with its own noise), and the verdict, which needs the whole predicted interval above 1 to say "turn
    on", never contradicts a measured gain or loss."""
    from helpers import checklist

    profile, data = _reference_model()
    pairs = checklist.model_pairs(profile)
    own = next(iter(pairs.values()))
    checked = 0
    for name, asked in checklist.SCENARIOS.items():
        answers = checklist.Answers(**{"concurrency": 1, **asked}, gpu_gb=96, target_config=own[0],
                                    draft_config=own[1], dtype=own[2])
        result = checklist.recommend(answers, data)
        for option in result["options"]:
            point = option["measured"]
            if point is None:
                continue
            checked += 1
            low, high = point["speedup_ci_low"], point["speedup_ci_high"]
            said = (name, option["method"], f"measured {point['speedup']:.2f} [{low:.2f}, {high:.2f}]",
                    f"predicted {option['speedup']:.2f} [{option['low']:.2f}, {option['high']:.2f}]")
            assert option["low"] <= high and low <= option["high"], said
            if high < 1:  # a measured loss is never predicted as a gain
                assert option["low"] <= 1, said
            if low > 1:  # nor a measured gain as a loss
                assert option["high"] >= 1, said
        if "RAG" in name:
            assert any(o["measured"] is not None for o in result["options"]), "the RAG case was measured (05)"
    assert checked >= 4
