"""Build real ``vllm.LLM`` engines for (profile, method, k, draft), one live engine at a time.

Everything is checked before an engine starts, so a wrong argument costs no start-up time.
On the CPU the engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): ~10 s to start
instead of ~60 s, one process instead of four, similar throughput (docs/measurements.md).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helpers import logs
from helpers.logs import VLLM_LOGS
from helpers.profiles import Profile, get_profile

# draft_alone: the draft served by itself, to time it; eagle3: an EAGLE-3 head (``spec.draft`` names it within the
# profile's eagle_heads); suffix: suffix decoding (needs arctic-inference, built by ``make setup``)
METHODS = ("baseline", "draft_model", "ngram", "draft_alone", "eagle3", "suffix")
MAX_K = 16

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on the CPU backend
logs.configure()  # vLLM's records to build/logs/, in this process and the ones it starts


OPEN_END = 1 << 16  # a k_per_batch_size range ending here covers every larger batch on the machines the kit runs on


@dataclass(frozen=True)
class EngineSpec:
    profile: str
    method: str = "baseline"
    k: int = 4
    draft: str | None = None  # draft candidate name within the profile; None = its default
    draft_sample_method: str = "greedy"
    max_model_len: int | None = None
    # vLLM's dynamic speculation: ((first batch size, last batch size, k), ...); k = 0 turns drafting off;
    # a last batch size of OPEN_END or more means "and every larger batch"
    k_per_batch_size: tuple[tuple[int, int, int], ...] | None = None
    # suffix decoding: how many earlier answers its global tree keeps (None: vLLM's default, 10,000); 0 turns the
    # global tree off, so each request drafts from its own prompt and answer only: no request is helped by others
    suffix_cached_requests: int | None = None

    def label(self) -> str:
        if self.method == "baseline":
            return "baseline"
        if self.method == "suffix" and self.suffix_cached_requests == 0:
            return f"suffix k={self.k}, no earlier answers"
        if self.method in ("ngram", "suffix"):
            return f"{self.method} k={self.k}"
        if self.method == "eagle3":
            return f"eagle3 {self.draft or 'default'} k={self.k}"
        draft = self.draft or _default_draft(self.profile)
        if self.method == "draft_alone":
            return f"draft {draft} alone"
        if self.k_per_batch_size:
            ranges = (f"{a}+:{k}" if b >= OPEN_END else f"{a}-{b}:{k}" for a, b, k in self.k_per_batch_size)
            return f"draft {draft} k by batch size " + ", ".join(ranges)
        return f"draft {draft} k={self.k}"


def _default_draft(profile: str) -> str:
    try:
        return get_profile(profile).default_draft
    except ValueError:
        return "default"


def _read_config(model: str) -> dict[str, Any] | None:
    path = Path(model) / "config.json"
    return json.loads(path.read_text()) if path.exists() else None


def validate(spec: EngineSpec) -> tuple[Profile, EngineSpec]:
    """Raise ``ValueError`` with a clear message for anything that would fail inside vLLM."""
    profile = get_profile(spec.profile)
    if spec.method not in METHODS:
        raise ValueError(f"unknown method {spec.method!r}; choose one of {METHODS}")
    if not isinstance(spec.k, int) or not 1 <= spec.k <= MAX_K:
        raise ValueError(f"k (num_speculative_tokens) must be an integer in 1..{MAX_K}, got {spec.k!r}")
    if spec.draft_sample_method not in ("greedy", "probabilistic"):
        raise ValueError(f"draft_sample_method must be 'greedy' or 'probabilistic', got {spec.draft_sample_method!r}")
    if spec.method == "eagle3":
        head = spec.draft or next(iter(profile.eagle_heads), None)
        profile.eagle_head(head)  # raises for a profile without heads or an unknown one
        if profile.is_local:
            _require_folder(profile.eagle_head(head), f"EAGLE-3 head {head!r}")
        spec = replace(spec, draft=head)
    if spec.method == "suffix":
        require_suffix()
    draft = spec.draft or profile.default_draft
    uses_draft = spec.method in ("draft_model", "draft_alone")
    if uses_draft:
        profile.draft(draft)  # raises for an unknown candidate
    if spec.k_per_batch_size is not None:
        if spec.method != "draft_model":
            raise ValueError("k_per_batch_size (dynamic speculation) applies to method 'draft_model' only")
        for first, last, k in spec.k_per_batch_size:
            if not 1 <= first <= last or not 0 <= k <= spec.k:
                raise ValueError(f"k_per_batch_size entry {(first, last, k)}: need 1 <= first <= last and "
                                 f"0 <= k <= {spec.k} (the spec's k)")
    spec = replace(spec, draft=draft if uses_draft or spec.method == "eagle3" else None, max_model_len=spec.max_model_len or profile.max_model_len)
    if profile.is_local:
        _require_folder(profile.target, "target")
        if uses_draft:
            _require_folder(profile.draft(draft), f"draft {draft!r}")
            check_pair(profile.target, profile.draft(draft))
    return profile, spec


def suffix_available() -> bool:
    """Whether vLLM's suffix decoding can run: it imports ``arctic_inference`` (a source-only package the kit builds
    in ``make setup``)."""
    import importlib.util

    return importlib.util.find_spec("arctic_inference") is not None


def require_suffix() -> None:
    if not suffix_available():
        raise ModuleNotFoundError("suffix decoding needs arctic-inference, which PyPI has only as source: `make setup` "
                                  "builds it unless SPECDEC_SUFFIX=0 (about 2 minutes on 2 cores, needs g++); or run "
                                  "`.venv/bin/python scripts/install_suffix.py`")


def _require_folder(model: str, what: str) -> None:
    if _read_config(model) is None:
        raise FileNotFoundError(f"{what} model folder {model} is missing or has no config.json; run `make models`")


def check_pair(target: str | dict[str, Any], draft: str | dict[str, Any]) -> None:
    """Raise for the first check the pair fails that vLLM (as the kit configures it) or the kit enforces."""
    from helpers.drafts import check_draft

    for check in check_draft(target, draft):
        if check.stops_engine and not check.ok:
            raise ValueError(f"unusable draft: {check.name} fails: {check.reason}")


def speculative_config(profile: Profile, spec: EngineSpec) -> dict[str, Any] | None:
    if spec.method in ("baseline", "draft_alone"):
        return None
    if spec.method == "ngram":
        return {"method": "ngram", "num_speculative_tokens": spec.k, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    if spec.method == "suffix":
        return {"method": "suffix", "num_speculative_tokens": spec.k,
                **({"suffix_decoding_max_cached_requests": spec.suffix_cached_requests}
                   if spec.suffix_cached_requests is not None else {})}
    if spec.method == "eagle3":
        return {"method": "eagle3", "model": profile.eagle_head(spec.draft), "num_speculative_tokens": spec.k,
                "draft_sample_method": spec.draft_sample_method}
    return {
        "method": "draft_model",
        "model": profile.draft(spec.draft),
        "num_speculative_tokens": spec.k,
        "draft_sample_method": spec.draft_sample_method,
        **({"num_speculative_tokens_per_batch_size": [list(e) for e in spec.k_per_batch_size]}
           if spec.k_per_batch_size else {}),
    }


def engine_kwargs(profile: Profile | None = None, max_model_len: int | None = None) -> dict[str, Any]:
    profile = profile or get_profile("cpu")
    return {
        "dtype": profile.dtype,
        "max_model_len": max_model_len or profile.max_model_len,
        "disable_log_stats": False,
        # Off so every repetition pays its own prefill, as a new request would: with vLLM's default (on)
        # a repeated prompt's TTFT fell from 1.52 s to 0.27 s here (1,020 tokens, cpu profile).
        "enable_prefix_caching": False,
        "seed": 0,
        # vLLM's "Loading safetensors checkpoint shards" bar is stderr output, not a log record: without this it
        # lands in the notebook (and inside 04's "run live" output). SPECDEC_VLLM_LOGS=1 brings it back.
        "use_tqdm_on_load": VLLM_LOGS,
        **profile.engine_options,
    }


# A baseline and one speculative arm stay live together, so paired runs can interleave them
# without rebuilding; building a third shuts the least recently used one down first.
MAX_LIVE = int(os.environ.get("SPECDEC_MAX_ENGINES", "2"))
_live: OrderedDict[EngineSpec, Any] = OrderedDict()


def max_live(profile) -> int:
    """How many engines may be live at once: ``MAX_LIVE``, fewer when the profile's ``gpu_memory_utilization``
    leaves no room on the card for two (each engine claims that fraction of the card)."""
    from helpers.profiles import MAX_FRACTION

    fraction = profile.engine_options.get("gpu_memory_utilization")
    return min(MAX_LIVE, max(1, int(MAX_FRACTION // fraction))) if fraction else MAX_LIVE


def _guard_kernel_rebind() -> None:
    """Work around a vLLM-CPU 0.32 crash when an engine is built after an n-gram engine in one process.

    Engine start-up scans every module in ``sys.modules`` to rebind Triton kernels to CPU versions;
    once the n-gram proposer has imported numba, llvmlite's function wrappers make that scan raise
    ``AttributeError: '_lib_fn_wrapper' object has no attribute 'get'``. llvmlite and numba hold no
    vLLM kernels, so they are hidden from the scan while it runs.
    """
    try:
        from vllm.triton_utils import dispatcher
    except ImportError:
        return
    original = dispatcher._rebind_kernels
    if getattr(original, "guarded", False):
        return

    def rebind(overrides):
        hidden = {name: module for name, module in sys.modules.items()
                  if name.split(".")[0] in ("llvmlite", "numba")}
        for name in hidden:
            del sys.modules[name]
        try:
            original(overrides)
        finally:
            sys.modules.update(hidden)

    rebind.guarded = True
    dispatcher._rebind_kernels = rebind


_builds = {"count": 0}


def get_engine(spec: EngineSpec):
    """The engine for ``spec``: a live one if it matches, else a new one (after shutting down the oldest).

    vLLM's records and the native lines of its C++ code go to the log file (``helpers.logs``); the first build in
    a process prints where. A failed build raises with the log's path and its error lines attached."""
    profile, spec = validate(spec)
    if spec in _live:
        _live.move_to_end(spec)
        return _live[spec]
    while len(_live) >= max_live(profile):
        shutdown_engine(next(iter(_live)))
    from helpers import cpu_expand_fix

    model = profile.draft(spec.draft) if spec.method == "draft_alone" else profile.target
    if _builds["count"] == 0 and not VLLM_LOGS:
        print(logs.where())
    _builds["count"] += 1
    status_file = logs.log_file().parent / f"plugins-{os.getpid()}-{_builds['count']}.jsonl"
    status_file.parent.mkdir(parents=True, exist_ok=True)
    status_file.unlink(missing_ok=True)
    os.environ[cpu_expand_fix.STATUS_FILE_ENV] = str(status_file)  # the engine's own processes write here
    with logs.native_to_log():  # importing vLLM prints (Triton's absence); a failed build raises with the log's path
        from vllm import LLM

        cpu_expand_fix.register()  # also a vLLM general plugin; called here for a checkout not installed with -e
        _guard_kernel_rebind()
        speculative = speculative_config(profile, spec)
        # Each request's own acceptance (its histogram of accepted drafts per step), so a batched run gives an
        # acceptance per prompt; vLLM refuses the option on an engine that does not speculate.
        per_request = {"per_request_spec_decode_metrics": "summary"} if speculative else {}
        llm = LLM(model=model, speculative_config=speculative, **engine_kwargs(profile, spec.max_model_len),
                  **per_request)
    in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0"
    llm._specdec_sampling = None if in_process else cpu_expand_fix.engine_sampling(
        cpu_expand_fix.read_records(status_file), exclude_pid=os.getpid())
    _live[spec] = llm
    return llm


def check_sampling(llm, temperature: float, what: str = "this engine") -> None:
    """Refuse a sampled (T > 0) request on an engine that would verify with vLLM-CPU's defective expand kernel
    (``helpers.cpu_expand_fix``); an in-process engine is judged by the kernel its process calls now."""
    if temperature <= 0:
        return
    from helpers import cpu_expand_fix

    sampling = getattr(llm, "_specdec_sampling", None) or cpu_expand_fix.engine_sampling(None)
    sampling.check(temperature, what)


def live_specs() -> list[EngineSpec]:
    return list(_live)


def shutdown_engine(spec: EngineSpec | None = None) -> None:
    """Shut one engine down (``spec``), or all of them; its EngineCore process too, where there is one."""
    # Keys of _live are validated specs (draft and max_model_len filled in): normalise the caller's spec the same way.
    specs = [validate(spec)[1]] if spec is not None else list(_live)
    for key in specs:
        llm = _live.pop(key, None)
        if llm is None:
            continue
        try:
            llm.llm_engine.engine_core.shutdown()
        finally:
            del llm
    gc.collect()
    release_free_memory()


def release_free_memory() -> None:
    """Hand the heap that a shut-down engine freed back to the system (glibc's malloc_trim), so that a notebook
    building engine after engine does not keep each one's freed weights and buffers as resident memory. A no-op
    where the C library has no malloc_trim (not glibc)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
