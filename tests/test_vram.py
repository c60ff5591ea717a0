import pytest

from helpers.vram import budget, kv_tokens_for, load_config, model_memory


def test_the_talks_numbers_from_the_configs():
    target = model_memory("meta-llama/Llama-3.1-8B-Instruct")
    draft = model_memory("meta-llama/Llama-3.2-1B-Instruct")
    assert target["params"] == 8_030_261_248          # the published parameter count
    assert target["weight_bytes"] / 1e9 == pytest.approx(16.06, abs=0.01)
    assert draft["weight_bytes"] / 1e9 == pytest.approx(2.47, abs=0.01)
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes
    assert target["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131_072
    assert draft["kv_bytes_per_token"] == 2 * 16 * 8 * 64 * 2


def test_dtype_changes_bytes_not_params():
    bf16 = model_memory("Qwen/Qwen3-8B", "bfloat16")
    fp32 = model_memory("Qwen/Qwen3-8B", "float32")
    assert fp32["params"] == bf16["params"]
    assert fp32["weight_bytes"] == 2 * bf16["weight_bytes"]
    assert fp32["kv_bytes_per_token"] == 2 * bf16["kv_bytes_per_token"]


def test_budget_adds_up_and_reports_headroom():
    gb = 1e9
    b = budget("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", 96 * gb, 8192, 4,
               utilization=0.45)
    used = b["target weights"] + b["draft weights"] + b["target KV"] + b["draft KV"]
    assert b["usable"] == pytest.approx(43.2 * gb)
    assert b["free"] == pytest.approx(b["usable"] - used)
    assert b["fits"]
    assert b["max_batch"] >= 4
    tight = budget("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", 24 * gb, 8192, 16)
    assert not tight["fits"] and tight["free"] < 0


def test_kv_tokens_matches_division():
    per_token = model_memory("meta-llama/Llama-3.2-1B-Instruct")["kv_bytes_per_token"]
    assert kv_tokens_for("meta-llama/Llama-3.2-1B-Instruct", 10 * per_token + 5) == 10


def test_malformed_configs_are_refused():
    with pytest.raises(ValueError, match="malformed config"):
        load_config({"hidden_size": 64})
    with pytest.raises(ValueError, match="malformed config"):
        load_config({"hidden_size": 64, "intermediate_size": 0, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "vocab_size": 10})
    with pytest.raises(FileNotFoundError):
        load_config("no/such-model")
    with pytest.raises(ValueError, match="dtype"):
        model_memory("Qwen/Qwen3-0.6B", dtype="float8_e9")
    with pytest.raises(ValueError, match="utilization"):
        budget("Qwen/Qwen3-8B", None, 1e9, 10, 1, utilization=1.5)
