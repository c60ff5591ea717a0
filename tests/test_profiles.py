"""GPU profiles size gpu_memory_utilization from the card; greedy equality is exact only on the cpu profile."""

import pytest

from helpers.profiles import (
    MARGIN_BYTES,
    PROFILES,
    first_divergence,
    for_card,
    get_profile,
    memory_fraction,
    with_eagle_heads,
)
from helpers.vram import budget

GB = 1e9
TALK = PROFILES["gpu-talk"]


def needs(profile, draft):
    parts = budget(profile.target, profile.draft(draft), 1, profile.max_model_len, 1, profile.dtype, utilization=1.0)
    return sum(parts[k] for k in ("target weights", "draft weights", "target KV", "draft KV")) + MARGIN_BYTES


def test_a_40_gb_card_leaves_room_for_both_models():
    fraction = memory_fraction(TALK, 40 * GB)
    weights = budget(TALK.target, TALK.draft(), 40 * GB, 8192, 1)
    assert fraction * 40 * GB > weights["target weights"] + weights["draft weights"]  # 18.5 GB; 0.45 gave 18.0 GB
    # the largest candidate (the 3B draft) sets it: 22.5 GB of weights, 2.0 GB of KV, 4 GiB margin
    assert fraction * 40 * GB >= needs(TALK, "llama-3.2-3b") > needs(TALK, "llama-3.2-1b")
    assert fraction == pytest.approx(0.72)
    assert fraction <= 0.95


def test_a_16_gb_card_is_refused_with_the_numbers():
    with pytest.raises(ValueError) as refused:
        memory_fraction(TALK, 16 * GB)
    message = str(refused.value)
    for number in ("28.8 GB", "22.5 GB of target + draft weights", "2.0 GB of KV", "8,192-token", "16.0 GB card",
                   "1.80 of"):
        assert number in message


def test_a_larger_card_gets_a_smaller_fraction():
    for profile in PROFILES.values():
        assert memory_fraction(profile, 80 * GB) < memory_fraction(profile, 40 * GB)
    assert for_card(TALK, 80 * GB).engine_options["gpu_memory_utilization"] == memory_fraction(TALK, 80 * GB)


def test_without_cuda_no_fraction_is_set():
    from helpers.profiles import cuda_available

    if cuda_available():
        pytest.skip("this machine has CUDA")
    assert "gpu_memory_utilization" not in get_profile("gpu-talk").engine_options


def test_greedy_equality_is_exact_only_on_the_cpu_profile():
    assert get_profile("cpu").exact_greedy
    assert not any(p.exact_greedy for p in PROFILES.values())


@pytest.mark.parametrize("ids, base, expected", [
    ([1, 2, 3], [1, 2, 3], None),
    ([1, 2, 3], [1, 5, 3], 1),
    ([1, 2], [1, 2, 3], 2),  # one stopped early: they differ where the shorter one ends
    ([], [], None),
])
def test_first_divergence(ids, base, expected):
    assert first_divergence(ids, base) == expected


def test_engines_stay_one_at_a_time_when_two_do_not_fit():
    from dataclasses import replace

    from helpers.engines import MAX_LIVE, max_live
    from helpers.profiles import get_profile

    talk = get_profile("gpu-talk")
    assert max_live(replace(talk, engine_options={"gpu_memory_utilization": 0.72})) == 1
    assert max_live(replace(talk, engine_options={"gpu_memory_utilization": 0.36})) == min(MAX_LIVE, 2)
    assert max_live(get_profile("cpu")) == MAX_LIVE


def test_the_cpu_profiles_dtype_is_float32_unless_asked(monkeypatch):
    monkeypatch.delenv("SPECDEC_CPU_DTYPE", raising=False)
    assert get_profile("cpu").dtype == "float32" and get_profile("cpu").exact_greedy
    monkeypatch.setenv("SPECDEC_CPU_DTYPE", "bfloat16")
    assert get_profile("cpu").dtype == "bfloat16" and not get_profile("cpu").exact_greedy
    assert "bfloat16 on the CPU" in get_profile("cpu").description  # what labels and logs say it ran in
    monkeypatch.setenv("SPECDEC_CPU_DTYPE", "float16")
    with pytest.raises(ValueError, match="SPECDEC_CPU_DTYPE"):
        get_profile("cpu")


def test_a_gated_profile_without_a_token_stops_with_what_to_do(monkeypatch, tmp_path):
    from helpers.profiles import LicenceNeeded, active_profile, check_access

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no stored token either
    monkeypatch.setenv("SPECDEC_PROFILE", "gpu-talk")
    with pytest.raises(LicenceNeeded, match="HF_TOKEN=.*SPECDEC_PROFILE=gpu-qwen3"):
        active_profile(verbose=False)
    check_access(PROFILES["gpu-qwen3"])  # ungated: nothing to check
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    assert active_profile(verbose=False).name == "gpu-talk"


def test_cuda_without_a_choice_gets_the_ungated_pair(monkeypatch):
    from helpers import profiles

    monkeypatch.delenv("SPECDEC_PROFILE", raising=False)
    monkeypatch.setattr(profiles, "cuda_available", lambda: True)
    name, why = profiles.choose_profile_name()
    assert name == "gpu-qwen3" and not PROFILES[name].gated and "gpu-talk" in why


def test_the_dtype_note_follows_the_cpu_and_the_dtype(monkeypatch):
    from helpers import hardware
    from helpers.profiles import dtype_note

    for features, expected in ((["AVX2", "AVX-512", "AVX512-BF16"], "SPECDEC_CPU_DTYPE=bfloat16"),
                               (["AVX2"], "bfloat16 was slower")):
        monkeypatch.setattr(hardware, "cpu_features", lambda f=features: f)
        monkeypatch.delenv("SPECDEC_CPU_DTYPE", raising=False)
        assert expected in dtype_note(get_profile("cpu"))
    monkeypatch.setenv("SPECDEC_CPU_DTYPE", "bfloat16")
    assert "first divergence" in dtype_note(get_profile("cpu"))


def test_calibration_drafts_are_the_default_and_the_soft_label_ones():
    from dataclasses import replace

    talk = PROFILES["gpu-talk"]
    assert talk.calibration_drafts == [talk.default_draft]
    cpu = replace(talk, drafts={"2l": "a", "1l": "b", "2l-soft": "c"}, default_draft="2l")
    assert cpu.calibration_drafts == ["2l", "2l-soft"]


def test_a_profile_with_other_eagle_heads_keeps_the_rest_and_gets_its_own_name():
    cpu = get_profile("cpu")
    try:
        changed = with_eagle_heads(cpu, ["eagle3", "new=/somewhere/new-head"])
        assert changed.name == "cpu-heads" and PROFILES["cpu-heads"] is changed  # engines keyed apart from cpu's
        assert changed.eagle_heads == {"eagle3": cpu.eagle_head("eagle3"), "new": "/somewhere/new-head"}
        assert changed.target == cpu.target and changed.k == cpu.k
        assert with_eagle_heads(cpu, {"a": "/a"}, "cpu-x").eagle_heads == {"a": "/a"}
        with pytest.raises(ValueError, match="no EAGLE-3 head 'missing'"):
            with_eagle_heads(cpu, ["missing"])
    finally:
        PROFILES.pop("cpu-heads", None)
        PROFILES.pop("cpu-x", None)
