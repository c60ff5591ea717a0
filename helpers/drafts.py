"""Is this model a usable draft for that target? Each check with its reason."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.vram import load_config, model_memory


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    required: bool  # vLLM refuses the pair (True) or it is only advice (False)
    reason: str


def _tokenizer_digest(model: str | Path) -> str | None:
    path = Path(model) / "tokenizer.json"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def check_draft(target: str | Path | dict[str, Any], draft: str | Path | dict[str, Any]) -> list[Check]:
    t, d = load_config(target), load_config(draft)
    tm, dm = model_memory(t), model_memory(d)
    checks = [Check(
        "same vocabulary size", t["vocab_size"] == d["vocab_size"], True,
        f"target {t['vocab_size']:,} vs draft {d['vocab_size']:,} token ids: vLLM verifies draft token ids with the "
        "target, so both must index the same vocabulary",
    )]
    if not isinstance(target, dict) and not isinstance(draft, dict):
        td, dd = _tokenizer_digest(target), _tokenizer_digest(draft)
        if td and dd:
            checks.append(Check("same tokenizer", td == dd, True,
                                "tokenizer.json files are byte-identical" if td == dd else
                                "tokenizer.json files differ: the same ids would mean different text"))
    ratio = dm["params"] / tm["params"]
    checks.append(Check(
        "draft much smaller", ratio < 0.5, True,
        f"draft has {ratio:.1%} of the target's parameters ({dm['params'] / 1e9:.2f} B vs {tm['params'] / 1e9:.2f} B); "
        "every draft step costs about this fraction of a target step in weight reads",
    ))
    family = t.get("model_type") == d.get("model_type")
    checks.append(Check(
        "same family", family, False,
        f"model_type {t.get('model_type')!r} vs {d.get('model_type')!r}: a draft trained on the same data and "
        "template agrees with the target more often",
    ))
    return checks


def usable(checks: list[Check]) -> bool:
    return all(c.ok for c in checks if c.required)
