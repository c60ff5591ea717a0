"""Is this model a usable draft for that target? Each check with its reason and who enforces it.

What vLLM 0.32 itself checks for a ``method="draft_model"`` pair, read from its source:

- ``SpeculativeConfig._verify_args`` (``vllm/config/speculative.py``) calls
  ``verify_equal_vocab_size_if_draft_model``, which raises ``ValueError`` ("Target and draft model should
  have the same vocabulary size") when ``get_vocab_size()`` differs, unless the speculative config sets
  ``use_heterogeneous_vocab=True``; ``DraftModelProposer.__init__`` (``vllm/v1/spec_decode/draft_model.py``)
  checks again. With the option, vLLM maps tokens through the intersection of the two vocabularies
  (TLI), and only with ``draft_sample_method="greedy"``. The kit never sets it.
- Nothing compares the tokenizers: without the option, ``SpeculativeConfig.__post_init__`` builds the
  draft's ``ModelConfig`` with ``tokenizer=self.target_model_config.tokenizer``, and draft token ids go to
  the target unmapped. A draft with another tokenizer of the same size runs; its ids mean other text, so
  the target rejects almost every draft token (the output is still the target's).
- Nothing compares sizes or families: a draft as large as the target runs, just slowly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.vram import load_config, model_memory

# Who enforces a check, from strictest to weakest.
VLLM_NEEDS_OPTION = "vLLM refuses unless use_heterogeneous_vocab=True"  # the kit does not set it
KIT_REFUSES = "the kit refuses (vLLM would run it)"  # helpers.engines.check_pair stops the engine
ADVICE = "advice"  # nobody refuses; it predicts a worse draft
RULES = (VLLM_NEEDS_OPTION, KIT_REFUSES, ADVICE)
VLLM_RULES = (VLLM_NEEDS_OPTION,)  # what stops vLLM itself with the kit's speculative config


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    rule: str  # one of RULES: who enforces this check
    reason: str

    @property
    def stops_engine(self) -> bool:
        """A failure stops the kit's engine: vLLM refuses it, or the kit's own guard does."""
        return self.rule != ADVICE


def _tokenizer_digest(model: str | Path) -> str | None:
    path = Path(model) / "tokenizer.json"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def check_draft(target: str | Path | dict[str, Any], draft: str | Path | dict[str, Any]) -> list[Check]:
    t, d = load_config(target), load_config(draft)
    tm, dm = model_memory(t), model_memory(d)
    checks = [Check(
        "same vocabulary size", t["vocab_size"] == d["vocab_size"], VLLM_NEEDS_OPTION,
        f"target {t['vocab_size']:,} vs draft {d['vocab_size']:,} token ids: vLLM's "
        "SpeculativeConfig.verify_equal_vocab_size_if_draft_model (vllm/config/speculative.py) raises "
        "ValueError for different sizes unless use_heterogeneous_vocab=True, which the kit does not set",
    )]
    if not isinstance(target, dict) and not isinstance(draft, dict):
        td, dd = _tokenizer_digest(target), _tokenizer_digest(draft)
        if td and dd:
            checks.append(Check(
                "same tokenizer", td == dd, KIT_REFUSES,
                ("tokenizer.json files are byte-identical" if td == dd else
                 "tokenizer.json files differ: the same ids would mean different text") +
                "; vLLM does not compare tokenizers (SpeculativeConfig.__post_init__ gives the draft the "
                "target's tokenizer), so a mismatch runs and the target rejects almost every draft token",
            ))
    ratio = dm["params"] / tm["params"]
    checks.append(Check(
        "draft much smaller", ratio < 0.5, KIT_REFUSES,
        f"draft has {ratio:.1%} of the target's parameters ({dm['params'] / 1e9:.2f} B vs {tm['params'] / 1e9:.2f} B); "
        "every draft step costs about this fraction of a target step in weight reads. vLLM does not compare "
        "sizes; the kit refuses drafts of half the target's size or more, which cannot pay",
    ))
    family = t.get("model_type") == d.get("model_type")
    checks.append(Check(
        "same family", family, ADVICE,
        f"model_type {t.get('model_type')!r} vs {d.get('model_type')!r}: a draft trained on the same data and "
        "template agrees with the target more often; vLLM does not compare families",
    ))
    return checks


def usable(checks: list[Check]) -> bool:
    """vLLM will run this pair as the kit configures it (method draft_model, no use_heterogeneous_vocab)."""
    return all(c.ok for c in checks if c.rule in VLLM_RULES)
