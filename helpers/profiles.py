"""Named model profiles: which target, which drafts, which engine settings.

``SPECDEC_PROFILE`` picks one by name; without it, a machine with CUDA gets ``gpu-qwen3`` (its models need no
licence) and any other machine ``cpu``. :func:`active_profile` says which and why, and stops on a profile whose
models are gated (``gpu-talk``: Meta's Llama licence) when no Hugging Face token is set, with what to do.

A GPU profile's ``gpu_memory_utilization`` is not fixed: :func:`get_profile` derives it from the card's
memory and the models' budget (:func:`memory_fraction`), and refuses a card the pair cannot fit.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from helpers.models import DRAFTS_DIR, TARGET_DIR, draft_dir, read_eagle_manifest, read_manifest
from helpers.vram import budget

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    target: str  # local folder or Hugging Face id
    drafts: dict[str, str]  # candidate name -> local folder or Hugging Face id
    default_draft: str
    k: int
    dtype: str
    max_model_len: int
    device: str  # "cpu" or "cuda"
    engine_options: dict = field(default_factory=dict)
    gated: bool = False  # the models need an accepted licence and a Hugging Face token to download
    eagle_heads: dict[str, str] = field(default_factory=dict)  # EAGLE-3 head name -> local folder or Hugging Face id

    @property
    def is_local(self) -> bool:
        return self.device == "cpu"

    @property
    def exact_greedy(self) -> bool:
        """Whether greedy speculative output must equal the baseline's token for token.

        On the float32 CPU profile it does, and the notebooks assert it. vLLM's docs ("Lossless guarantees
        of Speculative Decoding", docs/features/spec_decode) promise losslessness only "up to the precision
        limits of hardware numerics": floating-point precision and batch size can make outputs with and
        without speculation differ. So on GPU profiles (bf16) the notebooks report the first divergence
        (:func:`first_divergence`) instead of asserting equality.
        """
        return self.device == "cpu" and self.dtype == "float32"

    def eagle_head(self, name: str | None = None) -> str:
        if not self.eagle_heads:
            raise ValueError(f"profile {self.name!r} has no EAGLE-3 head")
        name = name or next(iter(self.eagle_heads))
        if name not in self.eagle_heads:
            raise ValueError(f"profile {self.name!r} has no EAGLE-3 head {name!r}; it has {sorted(self.eagle_heads)}")
        return self.eagle_heads[name]

    @property
    def calibration_drafts(self) -> list[str]:
        """The default draft and, beside it, the profile's soft-label drafts (named ``*-soft``: distilled from the
        target's distribution, so calibrated), for greedy against probabilistic drafting."""
        return [self.default_draft] + [n for n in self.drafts if n.endswith("-soft") and n != self.default_draft]

    def draft(self, name: str | None = None) -> str:
        name = name or self.default_draft
        if name not in self.drafts:
            raise ValueError(f"profile {self.name!r} has no draft {name!r}; it has {sorted(self.drafts)}")
        return self.drafts[name]


CPU_DTYPES = ("float32", "bfloat16")


def _cpu_dtype() -> str:
    """float32 unless ``SPECDEC_CPU_DTYPE`` says otherwise: greedy speculation is then token-for-token identical to
    the baseline, which the notebooks assert (docs/measurements.md, "float32 against bfloat16", for what bfloat16 gives)."""
    dtype = os.environ.get("SPECDEC_CPU_DTYPE", "float32")
    if dtype not in CPU_DTYPES:
        raise ValueError(f"SPECDEC_CPU_DTYPE must be one of {CPU_DTYPES}, got {dtype!r}")
    return dtype


BF16_MEASUREMENT = ROOT / "data" / "measurements" / "cpu_tuning-2026-12-04-avx512bf16.csv"


def _bf16_measured() -> str:
    """What bfloat16 gave against float32 in the shipped measurement (scripts/measure_cpu_tuning.py --dtypes)."""
    import pandas as pd

    runs = pd.read_csv(BF16_MEASUREMENT)
    medians = runs.groupby("dtype")[["target_tok_per_s", "json_speedup_2l"]].median()
    f32, bf16 = medians.loc["float32"], medians.loc["bfloat16"]
    return (f"on {runs['hardware'].iloc[0]} bfloat16 decoded {bf16.target_tok_per_s / f32.target_tok_per_s:.1f} "
            f"times as fast ({runs['round'].nunique()} rounds, medians), speculation's speedup "
            f"{bf16.json_speedup_2l:.2f}x against {f32.json_speedup_2l:.2f}x on one JSON prompt")


def dtype_note(profile: Profile) -> str:
    """What the cpu profile's dtype means on this CPU: why float32, and what bfloat16 gave where it was measured."""
    if profile.name != "cpu":
        return f"dtype {profile.dtype}"
    from helpers import hardware

    has_bf16 = "AVX512-BF16" in hardware.cpu_features()
    if profile.dtype == "float32":
        return ("dtype float32: greedy speculation is token-for-token the baseline's, which the notebooks assert. "
                + (f"This CPU has AVX512-BF16: {_bf16_measured()}; SPECDEC_CPU_DTYPE=bfloat16 trades the exact "
                   "check for it (docs/measurements.md, float32 against bfloat16)."
                   if has_bf16 else "Without AVX512-BF16 bfloat16 was slower than float32 where it was measured."))
    return ("dtype bfloat16 (SPECDEC_CPU_DTYPE): greedy speculation is compared with the baseline up to its first "
            "divergence instead of asserted identical" + ("" if has_bf16 else
                                                          "; this CPU has no AVX512-BF16, where bfloat16 was slower"))


def _cpu_profile() -> Profile:
    names, dtype = list(read_manifest()["drafts"]) or ["2l"], _cpu_dtype()
    return Profile(
        name="cpu",
        description=f"SmolLM2-135M-Instruct target with the kit's own distilled drafts, {dtype} on the CPU",
        target=str(TARGET_DIR),
        drafts={name: str(draft_dir(name)) for name in names},
        default_draft="2l" if "2l" in names else names[0],
        k=4,
        dtype=dtype,
        max_model_len=2048,
        device="cpu",
        engine_options={"enforce_eager": True},
        eagle_heads={name: str(DRAFTS_DIR / entry["dir"]) for name, entry in read_eagle_manifest().items()},
    )


PROFILES = {
    "gpu-talk": Profile(
        name="gpu-talk",
        description="The talk's setup: Llama-3.1-8B-Instruct target, Llama-3.2-1B-Instruct draft, bf16",
        target="meta-llama/Llama-3.1-8B-Instruct",
        drafts={"llama-3.2-1b": "meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-3b": "meta-llama/Llama-3.2-3B-Instruct"},
        default_draft="llama-3.2-1b",
        k=4,
        dtype="bfloat16",
        max_model_len=8192,
        device="cuda",
        gated=True,
        # vLLM's documented EAGLE-3 example for this target (docs/features/speculative_decoding/eagle)
        eagle_heads={"redhat-eagle3": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"},
    ),
    "gpu-qwen3": Profile(
        name="gpu-qwen3",
        description="Qwen3-8B target with a Qwen3-0.6B draft (the later version of the talk's repo), bf16",
        target="Qwen/Qwen3-8B",
        drafts={"qwen3-0.6b": "Qwen/Qwen3-0.6B", "qwen3-1.7b": "Qwen/Qwen3-1.7B"},
        default_draft="qwen3-0.6b",
        k=5,
        dtype="bfloat16",
        max_model_len=8192,
        device="cuda",
        # listed in the speculators docs' pretrained models (user_guide/algorithms/eagle3)
        eagle_heads={"redhat-eagle3": "RedHatAI/Qwen3-8B-speculator.eagle3"},
    ),
}


def first_divergence(ids, base_ids) -> int | None:
    """Index of the first token where two outputs differ (the shorter length when one is a prefix of the
    other), or None when they are identical."""
    for i, (a, b) in enumerate(zip(ids, base_ids)):
        if a != b:
            return i
    return None if len(ids) == len(base_ids) else min(len(ids), len(base_ids))


# What vLLM charges to gpu_memory_utilization besides weights and KV cache: the peak activations of its
# profiling pass (a batch of max_num_batched_tokens), CUDA graphs and non-torch allocations
# (vllm/v1/worker/gpu_worker.py: KV cache = requested memory - weights, activations and the rest). An
# estimate with room to spare for an 8B target, not measured by the kit on a GPU.
MARGIN_BYTES = 4 * 2**30
MAX_FRACTION = 0.95  # leave the CUDA context and the driver their share of the card


def memory_fraction(profile: Profile, card_bytes: float, margin_bytes: float = MARGIN_BYTES) -> float:
    """``gpu_memory_utilization`` for ``profile`` on a card of ``card_bytes`` total memory.

    Per draft candidate: target + draft weights, plus both KV caches for one ``max_model_len`` sequence
    (vLLM refuses to start without room for one), plus ``margin_bytes``; the largest candidate sets the
    fraction, so an engine with any of the profile's drafts fits. Rounded up to 0.01. ``ValueError``
    with the numbers if that is over ``MAX_FRACTION`` of the card.
    """
    worst = None
    for name, draft in profile.drafts.items():
        parts = budget(profile.target, draft, card_bytes, profile.max_model_len, 1, profile.dtype, utilization=1.0)
        weights = parts["target weights"] + parts["draft weights"]
        kv = parts["target KV"] + parts["draft KV"]
        if worst is None or weights + kv > worst[1] + worst[2]:
            worst = (name, weights, kv)
    name, weights, kv = worst
    need = weights + kv + margin_bytes
    if need > MAX_FRACTION * card_bytes:
        raise ValueError(
            f"profile {profile.name!r} with its largest draft {name!r} needs {need / 1e9:.1f} GB: {weights / 1e9:.1f} GB of "
            f"target + draft weights ({profile.dtype}), {kv / 1e9:.1f} GB of KV cache for one "
            f"{profile.max_model_len:,}-token sequence and a {margin_bytes / 1e9:.1f} GB margin; that is "
            f"{need / card_bytes:.2f} of this {card_bytes / 1e9:.1f} GB card, over {MAX_FRACTION}. Use a card of "
            f"at least {math.ceil(need / MAX_FRACTION / 1e9)} GB or the cpu profile")
    return math.ceil(100 * need / card_bytes) / 100


def for_card(profile: Profile, card_bytes: float) -> Profile:
    """``profile`` with ``gpu_memory_utilization`` set for a card of ``card_bytes`` (:func:`memory_fraction`)."""
    fraction = memory_fraction(profile, card_bytes)
    return replace(profile, engine_options={**profile.engine_options, "gpu_memory_utilization": fraction})


def with_eagle_heads(profile: Profile, heads: dict[str, str] | list[str], name: str | None = None) -> Profile:
    """The profile with only these EAGLE-3 heads, registered under a new name (``<profile>-heads`` unless ``name``
    is given) so its engines are told apart from the profile's. ``heads``: name -> folder, or a list of ``NAME`` (a
    head of the profile) and ``NAME=PATH`` (any other, e.g. a head under build/data-curve/)."""
    if isinstance(heads, list):
        heads = {n: path or profile.eagle_head(n) for n, _, path in (h.partition("=") for h in heads)}
    changed = replace(profile, name=name or f"{profile.name}-heads", eagle_heads=dict(heads))
    PROFILES[changed.name] = changed
    return changed


def profile_names() -> list[str]:
    return ["cpu", *PROFILES]


def get_profile(name: str) -> Profile:
    if name == "cpu":
        return _cpu_profile()
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {profile_names()}")
    profile = PROFILES[name]
    if profile.device == "cuda" and cuda_available():
        import torch

        profile = for_card(profile, torch.cuda.get_device_properties(0).total_memory)
    return profile


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def choose_profile_name() -> tuple[str, str]:
    """The profile to use and the reason, from ``SPECDEC_PROFILE`` or the hardware."""
    requested = os.environ.get("SPECDEC_PROFILE", "").strip()
    if requested:
        return requested, f"SPECDEC_PROFILE={requested}"
    if cuda_available():
        return "gpu-qwen3", ("CUDA is available and SPECDEC_PROFILE is not set; the talk's Llama pair is "
                             "SPECDEC_PROFILE=gpu-talk")
    return "cpu", "no CUDA device and SPECDEC_PROFILE is not set"


class LicenceNeeded(RuntimeError):
    pass


def check_access(profile: Profile) -> None:
    """Stop on a gated profile when this machine has no Hugging Face token, saying what to do."""
    if not profile.gated:
        return
    from huggingface_hub import get_token

    if get_token() is None:
        raise LicenceNeeded(
            f"profile {profile.name!r} downloads {profile.target} and its drafts, which need Meta's licence accepted "
            "on huggingface.co and a token on this machine: accept it on the model pages, then `export "
            "HF_TOKEN=...` (or `huggingface-cli login`) before starting Jupyter or make. Or use the ungated Qwen3 "
            "pair: SPECDEC_PROFILE=gpu-qwen3.")


def active_profile(verbose: bool = True) -> Profile:
    name, why = choose_profile_name()
    profile = get_profile(name)
    check_access(profile)
    if verbose:
        print(f"profile {profile.name!r} ({why}): {profile.description}")
        fraction = profile.engine_options.get("gpu_memory_utilization")
        if fraction:
            print(f"gpu_memory_utilization {fraction}: weights + KV for one {profile.max_model_len:,}-token "
                  f"sequence + {MARGIN_BYTES / 2**30:.0f} GiB margin, over this card's memory")
        if fraction and 2 * fraction > MAX_FRACTION:
            print("two live engines (a baseline and a speculative arm) do not fit on this card at that fraction: "
                  "the kit keeps one live at a time and rebuilds between arms (slower, same measurements)")
    return profile
