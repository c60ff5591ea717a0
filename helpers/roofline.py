"""Probes of this machine's memory bandwidth and FLOP rate, and the roofline floors they imply.

A decode step reads every weight (and the KV cache so far) once to produce one token per
sequence, so its floor is bytes / bandwidth. Prefill multiplies every weight by every prompt
token, about 2 × parameters × tokens FLOPs, so its floor is FLOPs / FLOP rate.
"""

from __future__ import annotations

import time

import numpy as np


def _best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure_bandwidth(megabytes: int = 512, repeats: int = 5, device: str = "cpu") -> float:
    """Bytes per second moved by a large array copy (read + write), the best of ``repeats``."""
    if megabytes <= 0 or repeats <= 0:
        raise ValueError("megabytes and repeats must be positive")
    n = megabytes * 2**20 // 4
    if device == "cpu":
        src = np.ones(n, dtype=np.float32)
        dst = np.empty_like(src)
        seconds = _best_of(repeats, lambda: np.copyto(dst, src))
    else:
        import torch

        src = torch.ones(n, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)

        def copy():
            dst.copy_(src)
            torch.cuda.synchronize()

        copy()
        seconds = _best_of(repeats, copy)
    return 2 * n * 4 / seconds


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


def prefill_floor_s(params: float, prompt_tokens: float, flops: float) -> float:
    """Least time to prefill: 2 × parameters × prompt tokens FLOPs at the measured rate."""
    if flops <= 0:
        raise ValueError("flops must be positive")
    return 2 * params * prompt_tokens / flops


def arithmetic_intensity(params: float, weight_bytes: float, tokens_per_pass: float) -> float:
    """FLOPs per byte of weights read when one pass processes ``tokens_per_pass`` tokens."""
    return 2 * params * tokens_per_pass / weight_bytes
