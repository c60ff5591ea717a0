"""Named model profiles: which target, which drafts, which engine settings.

``SPECDEC_PROFILE`` picks one by name; without it, a machine with CUDA gets ``gpu-talk`` and
any other machine ``cpu``. :func:`active_profile` says which and why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from helpers.models import TARGET_DIR, draft_dir, read_manifest

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

    @property
    def is_local(self) -> bool:
        return self.device == "cpu"

    def draft(self, name: str | None = None) -> str:
        name = name or self.default_draft
        if name not in self.drafts:
            raise ValueError(f"profile {self.name!r} has no draft {name!r}; it has {sorted(self.drafts)}")
        return self.drafts[name]


def _cpu_profile() -> Profile:
    names = list(read_manifest()["drafts"]) or ["2l"]
    return Profile(
        name="cpu",
        description="SmolLM2-135M-Instruct target with the kit's own distilled drafts, float32 on the CPU",
        target=str(TARGET_DIR),
        drafts={name: str(draft_dir(name)) for name in names},
        default_draft="2l" if "2l" in names else names[0],
        k=4,
        dtype="float32",
        max_model_len=2048,
        device="cpu",
        engine_options={"enforce_eager": True},
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
        engine_options={"gpu_memory_utilization": 0.45},
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
        engine_options={"gpu_memory_utilization": 0.45},
    ),
}


def profile_names() -> list[str]:
    return ["cpu", *PROFILES]


def get_profile(name: str) -> Profile:
    if name == "cpu":
        return _cpu_profile()
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {profile_names()}")
    return PROFILES[name]


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
        return "gpu-talk", "CUDA is available and SPECDEC_PROFILE is not set"
    return "cpu", "no CUDA device and SPECDEC_PROFILE is not set"


def active_profile(verbose: bool = True) -> Profile:
    name, why = choose_profile_name()
    profile = get_profile(name)
    if verbose:
        print(f"profile {profile.name!r} ({why}): {profile.description}")
    return profile
