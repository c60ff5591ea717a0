import pytest

from helpers.drafts import check_draft, usable


def by_name(checks):
    return {c.name: c for c in checks}


def test_the_talks_pair_is_usable():
    checks = by_name(check_draft("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"))
    assert all(c.ok for c in checks.values())
    assert "15.4%" in checks["draft much smaller"].reason


def test_each_failure_is_explained():
    mixed = check_draft("Qwen/Qwen3-8B", "meta-llama/Llama-3.2-1B-Instruct")
    assert not usable(mixed)
    names = {c.name for c in mixed if not c.ok}
    assert names == {"same vocabulary size", "same family"}
    assert "151,936" in by_name(mixed)["same vocabulary size"].reason
    reversed_pair = check_draft("meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")
    assert not usable(reversed_pair) and not by_name(reversed_pair)["draft much smaller"].ok


def test_family_is_advice_not_a_requirement():
    target = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8, "num_attention_heads": 4,
              "vocab_size": 1000, "model_type": "llama"}
    draft = {**target, "num_hidden_layers": 1, "model_type": "mistral"}
    checks = check_draft(target, draft)
    assert usable(checks) and not by_name(checks)["same family"].ok


def test_malformed_config_is_refused():
    with pytest.raises(ValueError, match="malformed"):
        check_draft({"hidden_size": 1}, "Qwen/Qwen3-0.6B")
