import json
import time

import pandas as pd
import pytest
import torch

from helpers.roofline import (
    Bandwidth,
    arithmetic_intensity,
    decode_floor_s,
    measure_bandwidth,
    measure_flops,
    prefill_floor_s,
    prefill_flops,
)
from helpers.vram import model_memory

# SmolLM2-135M-Instruct's config.json (the cpu profile's target), the fields the FLOP count reads
SMOLLM2 = {"num_hidden_layers": 30, "hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9,
           "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49_152, "tie_word_embeddings": True}


def test_the_hand_count_uses_smollm2s_real_config(cpu_models):
    real = json.loads((cpu_models / "config.json").read_text())
    assert {key: real[key] for key in SMOLLM2} == SMOLLM2
    assert prefill_flops(cpu_models, 2048) == prefill_flops(SMOLLM2, 2048)


def test_floors_by_hand():
    # 16 GB of weights at 1.8 TB/s: 8.9 ms per decode step at batch 1 with no context
    assert decode_floor_s(16e9, 131072, 0, 1.8e12) == pytest.approx(16e9 / 1.8e12)
    # 1000 tokens of context add 131 MB per sequence
    assert decode_floor_s(16e9, 131072, 1000, 1.8e12, batch=2) == pytest.approx((16e9 + 2 * 131072e3) / 1.8e12)
    assert arithmetic_intensity(8e9, 16e9, 1) == 1.0  # bf16 decode at batch 1: one FLOP per byte


def test_prefill_flops_of_smollm2_by_hand():
    # SmolLM2-135M's config.json: 30 layers, hidden 576, intermediate 1536, 9 heads and 3 KV heads of
    # head_dim 64, vocab 49,152 (embeddings tied to the LM head). A 2,048-token prompt:
    layers, hidden, inter, heads, kv_heads, head_dim, vocab, n = 30, 576, 1536, 9, 3, 64, 49_152, 2048
    q_and_o = 2 * hidden * heads * head_dim           # 663,552 weights
    k_and_v = 2 * hidden * kv_heads * head_dim        # 221,184
    mlp = 3 * hidden * inter                          # gate, up, down: 2,654,208
    assert layers * (q_and_o + k_and_v + mlp) == 106_168_320
    linear = 2 * 106_168_320 * n                      # every token through every layer's weights
    assert linear == 434_865_438_720
    # causal attention: query i sees i + 1 keys, n(n+1)/2 pairs per head; QK^T and A.V, 2 FLOPs per
    # multiply-add, over head_dim, for 9 heads, in 30 layers
    attention = layers * 2 * 2 * heads * head_dim * (n * (n + 1) // 2)
    assert attention == 145_025_925_120
    lm_head = 2 * hidden * vocab                      # the last position only
    assert lm_head == 56_623_104
    # the embedding lookup is a gather: no FLOPs
    assert prefill_flops(SMOLLM2, n) == linear + attention + lm_head == 579_947_986_944
    assert prefill_floor_s(SMOLLM2, n, 1e12) == pytest.approx(0.579947986944)

    # the old count, 2 x all parameters x tokens, charged the tied embedding/LM head (21% of the
    # parameters) to every prompt token and left out attention's n^2 term
    params = model_memory(SMOLLM2)["params"]
    assert hidden * vocab / params == pytest.approx(0.21, abs=0.005)
    assert prefill_flops(SMOLLM2, n) != 2 * params * n


def test_prefill_flops_grow_with_n_squared_and_take_series():
    one, two = prefill_flops(SMOLLM2, 1024), prefill_flops(SMOLLM2, 2048)
    assert 2 < two / one < 4  # more than linear: the attention term
    lengths = pd.Series([128, 2048])
    assert list(prefill_floor_s(SMOLLM2, lengths, 1.0)) == [prefill_flops(SMOLLM2, 128), prefill_flops(SMOLLM2, 2048)]


def test_bandwidth_probe_is_torch_multithreaded_and_says_so():
    start = time.perf_counter()
    bandwidth = measure_bandwidth()  # the defaults, as notebook 01 uses them in fast mode
    assert time.perf_counter() - start < 10.0  # cheap enough for every fast run, with room for a loaded machine
    assert isinstance(bandwidth, Bandwidth)
    assert bandwidth.threads == torch.get_num_threads() and bandwidth.device == "cpu"
    assert 1e8 < bandwidth.bytes_per_s < 1e13
    text = bandwidth.describe()
    assert "read + written" in text and f"{torch.get_num_threads()} torch threads" in text and "256 MiB" in text


def test_flops_probe_measures_something_plausible():
    flops = measure_flops(n=256, repeats=2)
    assert 1e7 < flops < 1e15


@pytest.mark.parametrize("call", [
    lambda: decode_floor_s(1, 1, 1, 0),
    lambda: prefill_floor_s(SMOLLM2, 1, -1),
    lambda: measure_bandwidth(megabytes=0),
    lambda: measure_flops(n=0),
])
def test_invalid(call):
    with pytest.raises(ValueError):
        call()
