"""Real engines on the `cpu` profile: validation, reuse, counters, shutdown and memory."""

import json
import os

import psutil
import pytest

from helpers import engines
from helpers.engines import EngineSpec, check_pair, get_engine, live_specs, shutdown_engine, validate
from helpers.metrics import snapshot
from helpers.profiles import PROFILES, Profile
from helpers.timing import run, sampling_params

PROMPT = ["Return only a JSON object with the keys \"id\" and \"tags\" for item 7."]


@pytest.fixture(autouse=True)
def no_engines_left():
    yield
    shutdown_engine()


def target_config(cpu_models):
    return json.loads((cpu_models / "config.json").read_text())


@pytest.mark.parametrize("spec, message", [
    (EngineSpec("no-such-profile"), "unknown profile"),
    (EngineSpec("cpu", method="medusa"), "unknown method"),
    (EngineSpec("cpu", method="draft_model", k=0), "k .* 1..16"),
    (EngineSpec("cpu", method="draft_model", k=17), "k .* 1..16"),
    (EngineSpec("cpu", method="draft_model", draft="99l"), "no draft '99l'"),
    (EngineSpec("cpu", method="draft_model", draft_sample_method="top-p"), "draft_sample_method"),
    (EngineSpec("cpu", method="ngram", k_per_batch_size=((1, 4, 2),)), "'draft_model' only"),
    (EngineSpec("cpu", method="draft_model", k=4, k_per_batch_size=((1, 4, 5),)), "0 <= k <= 4"),
    (EngineSpec("cpu", method="draft_model", k_per_batch_size=((4, 2, 1),)), "first <= last"),
])
def test_invalid_spec_is_refused_before_any_engine(cpu_models, spec, message):
    with pytest.raises(ValueError, match=message):
        get_engine(spec)
    assert live_specs() == []


@pytest.mark.parametrize("spec, label", [
    (EngineSpec("cpu"), "baseline"),
    (EngineSpec("cpu", method="ngram", k=3), "ngram k=3"),
    (EngineSpec("cpu", method="draft_model", draft="1l"), "draft 1l k=4"),
    (EngineSpec("cpu", method="draft_alone", draft="2l"), "draft 2l alone"),
    (EngineSpec("cpu", method="draft_model", draft="2l", k_per_batch_size=((1, 3, 4), (4, engines.OPEN_END, 0))),
     "draft 2l k by batch size 1-3:4, 4+:0"),
])
def test_labels_name_the_arm(spec, label):
    assert spec.label() == label


def test_missing_model_folder_is_refused(tmp_path, monkeypatch):
    broken = Profile("broken", "no weights", str(tmp_path / "absent"), {}, "", 4, "float32", 512, "cpu")
    monkeypatch.setitem(PROFILES, "broken", broken)
    with pytest.raises(FileNotFoundError, match="make models"):
        get_engine(EngineSpec("broken"))
    assert live_specs() == []


def test_vocabulary_mismatch_and_oversized_draft_are_refused(cpu_models):
    target = target_config(cpu_models)
    with pytest.raises(ValueError, match="same vocabulary size"):
        check_pair(target, {**target, "num_hidden_layers": 2, "vocab_size": 32000})
    with pytest.raises(ValueError, match="draft much smaller"):
        check_pair(target, target)
    check_pair(target, {**target, "num_hidden_layers": 2})


def test_temperature_below_zero_is_refused():
    with pytest.raises(ValueError, match="temperature"):
        sampling_params(temperature=-1.0)


def test_validate_fills_the_profile_defaults(cpu_models):
    profile, spec = validate(EngineSpec("cpu", "draft_model"))
    assert spec.draft == profile.default_draft and spec.max_model_len == profile.max_model_len


def test_same_configuration_reuses_the_engine_and_counters_difference(cpu_models):
    spec = EngineSpec("cpu", "draft_model", k=3)
    llm = get_engine(spec)
    assert get_engine(EngineSpec("cpu", "draft_model", k=3)) is llm
    params = sampling_params(0.0, max_tokens=24)
    start = snapshot(llm)
    first = run(spec, PROMPT, params)["counters"]
    second = run(spec, PROMPT, params)["counters"]
    total = snapshot(llm) - start
    assert first.drafts > 0 and first.draft_tokens == 3 * first.drafts
    assert 0 <= first.accepted <= first.draft_tokens
    assert len(first.per_position) == 3 and sum(first.per_position) == first.accepted
    assert first == second  # greedy, same prompt, same engine: the same verify steps
    assert total.drafts == first.drafts + second.drafts and total.accepted == first.accepted + second.accepted


def test_a_third_engine_shuts_the_oldest_down(cpu_models):
    a, b, c = EngineSpec("cpu"), EngineSpec("cpu", "ngram", k=2), EngineSpec("cpu", "ngram", k=3)
    for spec in (a, b, c):
        get_engine(spec)
    assert live_specs() == [validate(b)[1], validate(c)[1]]


def test_memory_stays_flat_across_engines(cpu_models):
    process = psutil.Process()
    rss = []
    for spec in [EngineSpec("cpu", "ngram", k=2), EngineSpec("cpu", "draft_model", k=2)] * 2:
        run(spec, PROMPT, sampling_params(0.0, max_tokens=8))
        shutdown_engine()
        rss.append(process.memory_info().rss)
    growth = (rss[3] - rss[1]) / 2**20
    print(f"RSS after each shutdown (MiB): {[round(r / 2**20) for r in rss]}; growth over a second cycle {growth:.0f} MiB")
    assert growth < 300, f"memory grew by {growth:.0f} MiB over a second build/shutdown cycle"


def test_engine_module_runs_in_process_by_default():
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert engines.MAX_LIVE == 2


def test_shutdown_by_the_callers_spec_stops_the_engine(cpu_models):
    spec = EngineSpec("cpu")  # unvalidated, as notebooks write it
    get_engine(spec)
    shutdown_engine(spec)
    assert live_specs() == []


def test_counters_belong_to_the_engine_that_ran(cpu_models):
    """vLLM's get_metrics() reads a process-global registry that the newest engine owns: an older live engine's
    run must still report its own drafts (helpers.metrics reads each engine's own counters)."""
    spec = EngineSpec("cpu", "draft_model", k=2)
    run(spec, PROMPT, sampling_params(0.0, max_tokens=8))
    get_engine(EngineSpec("cpu", "ngram", k=2))  # built later: now owns vLLM's registry
    again = run(spec, PROMPT, sampling_params(0.0, max_tokens=8))["counters"]
    assert again.drafts > 0 and again.draft_tokens == 2 * again.drafts
