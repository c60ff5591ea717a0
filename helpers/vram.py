"""Memory of a model from its Hugging Face ``config.json``: weights, KV cache per token, budgets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
CONFIG_DIR = Path(__file__).resolve().parent.parent / "data" / "model_configs"
REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def load_config(config: str | Path | dict[str, Any]) -> dict[str, Any]:
    """A config dict from a dict, a ``config.json`` path, a model folder or a shipped config name."""
    if isinstance(config, dict):
        data = config
    else:
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            shipped = CONFIG_DIR / (str(config).replace("/", "--") + ".json")
            if not shipped.exists():
                raise FileNotFoundError(f"no config at {path} and no shipped config {shipped.name}")
            path = shipped
        data = json.loads(path.read_text())
    missing = [key for key in REQUIRED if not isinstance(data.get(key), int) or data[key] <= 0]
    if missing:
        raise ValueError(f"malformed config: missing or non-positive {missing}")
    return data


def _bytes_per(dtype: str) -> float:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


def model_memory(config: str | Path | dict[str, Any], dtype: str = "bfloat16", kv_dtype: str | None = None) -> dict:
    """Parameters, weight bytes and KV-cache bytes per token of a Llama/Qwen-style decoder."""
    c = load_config(config)
    hidden, layers, heads = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or hidden // heads
    vocab, inter = c["vocab_size"], c["intermediate_size"]
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o + k, v
    if c.get("attention_bias"):
        attention += heads * head_dim + 2 * kv_heads * head_dim
    mlp = 3 * hidden * inter
    norms = 2 * hidden + (2 * head_dim if c.get("model_type", "").startswith("qwen3") else 0)
    embeddings = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
    params = layers * (attention + mlp + norms) + embeddings + hidden
    kv_bytes = 2 * layers * kv_heads * head_dim * _bytes_per(kv_dtype or dtype)
    return {
        "params": int(params),
        "weight_bytes": int(params * _bytes_per(dtype)),
        "kv_bytes_per_token": int(kv_bytes),
        "layers": layers,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "dtype": dtype,
    }


def kv_tokens_for(config: str | Path | dict[str, Any], kv_bytes: float, dtype: str = "bfloat16") -> int:
    """How many tokens of KV cache fit in ``kv_bytes``."""
    return int(kv_bytes // model_memory(config, dtype)["kv_bytes_per_token"])


def budget(
    target: str | Path | dict[str, Any],
    draft: str | Path | dict[str, Any] | None,
    gpu_bytes: float,
    context_tokens: int,
    batch: int,
    dtype: str = "bfloat16",
    utilization: float = 0.9,
) -> dict[str, float]:
    """GPU memory for target + draft weights and both KV caches at ``batch`` × ``context_tokens``."""
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must be in (0, 1], got {utilization}")
    if context_tokens < 0 or batch < 0:
        raise ValueError("context_tokens and batch must be non-negative")
    t = model_memory(target, dtype)
    d = model_memory(draft, dtype) if draft is not None else {"weight_bytes": 0, "kv_bytes_per_token": 0}
    tokens = context_tokens * batch
    parts = {
        "target weights": t["weight_bytes"],
        "draft weights": d["weight_bytes"],
        "target KV": t["kv_bytes_per_token"] * tokens,
        "draft KV": d["kv_bytes_per_token"] * tokens,
    }
    usable = gpu_bytes * utilization
    parts["free"] = usable - sum(parts.values())
    parts["usable"] = usable
    parts["fits"] = parts["free"] >= 0
    per_sequence = (t["kv_bytes_per_token"] + d["kv_bytes_per_token"]) * context_tokens
    spare = usable - t["weight_bytes"] - d["weight_bytes"]
    parts["max_batch"] = int(spare // per_sequence) if per_sequence and spare > 0 else 0
    return parts
