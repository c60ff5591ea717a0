"""Probes of this machine's memory bandwidth and FLOP rate, and the roofline floors they imply.

A decode step reads every weight (and the KV cache so far) once to produce one token per
sequence, so its floor is bytes / bandwidth. Prefill runs every prompt token through every layer's
matrix multiplies, plus causal attention's n² term, and the LM head for the last position only (see
:func:`prefill_flops`); its floor is those FLOPs / FLOP rate.

The CPU bandwidth probe copies a large float32 tensor with ``torch.Tensor.copy_`` on torch's thread
count, the threads the engine's own kernels use; it reports bytes read + written per second and the
thread count it ran with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.vram import load_config


def _best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@dataclass(frozen=True)
class Bandwidth:
    """What :func:`measure_bandwidth` measured: bytes read + written per second by one tensor copy."""

    bytes_per_s: float
    threads: int  # torch threads the copy ran with (CPU); 0 on a GPU, where it does not apply
    megabytes: int  # MiB copied per repetition: this much read and this much written
    device: str

    def describe(self) -> str:
        who = f"{self.threads} torch threads" if self.device == "cpu" else self.device
        return (f"{self.bytes_per_s / 1e9:.1f} GB/s read + written by torch copy_ of {self.megabytes} MiB "
                f"float32 ({who})")


def measure_bandwidth(megabytes: int = 256, repeats: int = 3, device: str = "cpu") -> Bandwidth:
    """Bytes read + written per second by ``torch.Tensor.copy_`` of a ``megabytes`` MiB float32 tensor.

    On the CPU the copy runs multi-threaded on torch's thread count (``torch.get_num_threads()``,
    reported in the result): in a notebook whose in-process CPU engine has started, the threads that
    engine bound for its own kernels. A single-threaded copy would understate what the engine streams.
    Each repetition counts 2 × ``megabytes`` (read the source, write the destination); the best of
    ``repeats`` after one warm-up copy. The defaults take well under 2 s on 2 cores.
    """
    import torch

    if megabytes <= 0 or repeats <= 0:
        raise ValueError("megabytes and repeats must be positive")
    n = megabytes * 2**20 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)

    def copy():
        dst.copy_(src)
        if device != "cpu":
            torch.cuda.synchronize()

    copy()  # warm-up: the first write also maps the destination's pages
    seconds = _best_of(repeats, copy)
    threads = torch.get_num_threads() if device == "cpu" else 0
    return Bandwidth(2 * n * 4 / seconds, threads, megabytes, device)


def measure_flops(n: int = 1024, repeats: int = 3, device: str = "cpu", dtype: str = "float32") -> float:
    """FLOP/s of an n×n matrix multiply in torch (2 n³ FLOPs), the best of ``repeats``."""
    import torch

    if n <= 0 or repeats <= 0:
        raise ValueError("n and repeats must be positive")
    a = torch.randn(n, n, dtype=getattr(torch, dtype), device=device)
    b = torch.randn(n, n, dtype=getattr(torch, dtype), device=device)

    def matmul():
        a @ b
        if device != "cpu":
            torch.cuda.synchronize()

    matmul()
    return 2 * n**3 / _best_of(repeats, matmul)


def decode_floor_s(weight_bytes: float, kv_bytes_per_token: float, context_tokens: float, bandwidth: float,
                   batch: int = 1) -> float:
    """Least time of one decode step: all weights once, plus each sequence's KV cache."""
    if bandwidth <= 0:
        raise ValueError("bandwidth must be positive")
    return (weight_bytes + batch * kv_bytes_per_token * context_tokens) / bandwidth


def prefill_flops(config: str | Path | dict[str, Any], prompt_tokens):
    """Matrix-multiply FLOPs of one prefill of ``prompt_tokens`` tokens (2 FLOPs per multiply-add).

    Per layer, every prompt token goes through the q, k, v, o projections and the gated MLP
    (gate, up, down): 2 × those weights per token. Attention is counted **with causal masking**:
    query i attends to keys 0..i, n(n+1)/2 query-key pairs per head, and QKᵀ and A·V each cost
    2 × head_dim FLOPs per pair, so 4 × heads × head_dim × n(n+1)/2 per layer (full, unmasked
    attention would be 4 × heads × head_dim × n²). The LM head runs for the last position only
    (vLLM computes logits just where it samples: ``GPUModelRunner.execute_model`` takes
    ``hidden_states[logits_indices]``, a class the CPU runner inherits): 2 × hidden × vocab once. The
    embedding lookup is a gather, not a matrix multiply: no FLOPs. Norms, RoPE, SiLU and softmax are
    elementwise and left out. ``prompt_tokens`` may be a number or an array / pandas Series.
    """
    c = load_config(config)
    hidden, layers, heads = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or hidden // heads
    n = prompt_tokens
    projections = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim  # q, o + k, v
    mlp = 3 * hidden * c["intermediate_size"]
    linear = 2 * layers * (projections + mlp) * n
    attention = layers * 2 * 2 * heads * head_dim * n * (n + 1) // 2
    lm_head = 2 * hidden * c["vocab_size"]
    return linear + attention + lm_head


def prefill_floor_s(config: str | Path | dict[str, Any], prompt_tokens, flops: float):
    """Least time to prefill: :func:`prefill_flops` at the measured FLOP rate."""
    if flops <= 0:
        raise ValueError("flops must be positive")
    return prefill_flops(config, prompt_tokens) / flops


def arithmetic_intensity(params: float, weight_bytes: float, tokens_per_pass: float) -> float:
    """FLOPs per byte of weights read when one pass processes ``tokens_per_pass`` tokens."""
    return 2 * params * tokens_per_pass / weight_bytes
