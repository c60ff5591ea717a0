"""An EAGLE-3 draft head for the kit's Llama-architecture target, in plain PyTorch, saved as vLLM loads it.

EAGLE-3 (Li et al. 2025) drafts from the target's own features instead of running a small model from scratch:
at position i it takes three of the target's hidden states (after layers 2, 15 and 27 of 30, vLLM's default for
Llama), projects them with ``fc`` to one hidden vector, joins it with the embedding of the next token and runs one
decoder layer whose attention takes both (2 x hidden inputs). Its output predicts the token after next; for the
following draft positions the layer's own output (before the final norm) replaces the target's features.

The head predicts over a reduced *draft vocabulary* (``d2t``: draft id -> target id offset; ``t2d``: which target
ids the draft can name), so its output layer costs a fraction of the target's 49,152-token head. It shares the
target's token embeddings (not saved; vLLM shares them).

Weight names, the forward pass and the draft vocabulary follow ``vllm/model_executor/models/llama_eagle3.py``
(vLLM 0.32): ``midlayer.*``, ``fc``, ``norm``, ``lm_head``, ``d2t``, ``t2d``.

Training uses EAGLE-3's "training-time test": step s at sequence index i reads the token at i + 1 + s and, for
s >= 1, the head's own output of step s - 1 at i; its attention sees step 0's keys up to i (what the drafter's KV
cache holds after a verify step) and the keys of steps 1..s at i alone (its own earlier draft positions).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

AUX_LAYERS = (2, 15, 27)  # vLLM's default for a 30-layer Llama: (2, n // 2, n - 3), outputs of that many layers


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding, neox style (halves), as vLLM's Llama and Hugging Face's rotate_half apply it.

    x: (batch, heads, tokens, head_dim); positions: (batch, tokens)."""
    half = x.shape[-1] // 2
    freqs = theta ** (-torch.arange(half, dtype=torch.float32) / half)
    angles = positions.to(torch.float32)[:, None, :, None] * freqs
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Eagle3Head(nn.Module):
    def __init__(self, target_config: dict, draft_vocab: torch.Tensor):
        super().__init__()
        c = target_config
        hidden, eps = c["hidden_size"], c["rms_norm_eps"]
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.theta = float(c.get("rope_theta") or c["rope_parameters"]["rope_theta"])
        self.target_config = c
        self.fc = nn.Linear(len(AUX_LAYERS) * hidden, hidden, bias=False)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.hidden_norm = RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(2 * hidden, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(2 * hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(2 * hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.gate_proj = nn.Linear(hidden, c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(hidden, c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], hidden, bias=False)
        self.norm = RMSNorm(hidden, eps)
        self.lm_head = nn.Linear(hidden, len(draft_vocab), bias=False)
        self.register_buffer("draft_vocab", draft_vocab.clone())  # draft id -> target id, ascending

    def step(self, embeds, hidden, positions, past_keys, past_values, mask):
        """One pass of the decoder layer. Returns (normed output, pre-norm output, this step's keys, values)."""
        b, t, _ = embeds.shape
        residual = hidden
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], dim=-1)
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rope(q, positions, self.theta), rope(k, positions, self.theta)
        keys, values = torch.cat(past_keys + [k], dim=2), torch.cat(past_values + [v], dim=2)
        attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask[:, None], enable_gqa=True)
        residual = residual + self.o_proj(attn.transpose(1, 2).reshape(b, t, -1))
        x = self.post_attention_layernorm(residual)
        residual = residual + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.norm(residual), residual, k, v

    def unroll(self, features, embed_next, valid, steps: int):
        """Training-time test over ``steps`` draft positions.

        features: (batch, tokens, 3 x hidden), the target's aux hidden states at index i;
        embed_next: (batch, tokens + steps, hidden), embedding of the token at index i + 1 (so step s reads
        embed_next[:, i + s]); valid: (batch, tokens) bool, real (not padding) positions.
        Returns one (batch, tokens, hidden) normed output per step: the input of lm_head for the token after
        i + 1 + s."""
        b, t, _ = features.shape
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
        diagonal = torch.eye(t, dtype=torch.bool)
        base_mask = causal[None] & valid[:, None, :]
        base_mask = base_mask | diagonal[None]  # a padded query still sees itself (no all-masked rows)
        positions = torch.arange(t)[None].expand(b, t)
        hidden, keys, values, outputs = self.fc(features), [], [], []
        for s in range(steps):
            mask = torch.cat([base_mask] + [diagonal[None].expand(b, t, t)] * s, dim=-1)
            normed, hidden, k, v = self.step(embed_next[:, s:s + t], hidden, positions + s, keys, values, mask)
            keys, values = keys + [k], values + [v]
            outputs.append(normed)
        return outputs

    def save(self, out_dir: Path, extra_config: dict | None = None) -> Path:
        """Write config.json and model.safetensors in the layout vLLM's LlamaForCausalLMEagle3 loads."""
        from safetensors.torch import save_file

        c = self.target_config
        target_vocab = c["vocab_size"]
        d2t = self.draft_vocab - torch.arange(len(self.draft_vocab))
        t2d = torch.zeros(target_vocab, dtype=torch.bool)
        t2d[self.draft_vocab] = True
        weights = {
            "fc.weight": self.fc.weight,
            "midlayer.input_layernorm.weight": self.input_layernorm.weight,
            "midlayer.hidden_norm.weight": self.hidden_norm.weight,
            "midlayer.self_attn.q_proj.weight": self.q_proj.weight,
            "midlayer.self_attn.k_proj.weight": self.k_proj.weight,
            "midlayer.self_attn.v_proj.weight": self.v_proj.weight,
            "midlayer.self_attn.o_proj.weight": self.o_proj.weight,
            "midlayer.post_attention_layernorm.weight": self.post_attention_layernorm.weight,
            "midlayer.mlp.gate_proj.weight": self.gate_proj.weight,
            "midlayer.mlp.up_proj.weight": self.up_proj.weight,
            "midlayer.mlp.down_proj.weight": self.down_proj.weight,
            "norm.weight": self.norm.weight,
            "lm_head.weight": self.lm_head.weight,
        }
        tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in weights.items()}
        tensors["d2t"], tensors["t2d"] = d2t.to(torch.int64).contiguous(), t2d.contiguous()
        config = {
            "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
            "hidden_size": c["hidden_size"], "intermediate_size": c["intermediate_size"],
            "num_attention_heads": self.heads, "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim,
            "num_hidden_layers": 1, "rms_norm_eps": c["rms_norm_eps"], "rope_theta": self.theta,
            "max_position_embeddings": c["max_position_embeddings"], "hidden_act": "silu",
            "vocab_size": target_vocab, "draft_vocab_size": len(self.draft_vocab),
            "target_hidden_size": c["hidden_size"], "tie_word_embeddings": False,
            "bos_token_id": c.get("bos_token_id"), "eos_token_id": c.get("eos_token_id"),
            "eagle_aux_hidden_state_layer_ids": list(AUX_LAYERS), "torch_dtype": "bfloat16",
            **(extra_config or {}),
        }
        out_dir.mkdir(parents=True, exist_ok=True)
        save_file(tensors, out_dir / "model.safetensors", metadata={"format": "pt"})
        (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        return out_dir

    @classmethod
    def load(cls, directory: Path, target_config: dict) -> Eagle3Head:
        """Read back a head written by ``save`` (float32), e.g. to measure its agreement."""
        from safetensors.torch import load_file

        tensors = load_file(directory / "model.safetensors")
        draft_vocab = torch.arange(len(tensors["d2t"])) + tensors["d2t"]
        head = cls(target_config, draft_vocab)
        state = {name.replace("midlayer.", "").replace("self_attn.", "").replace("mlp.", ""): value.float()
                 for name, value in tensors.items() if name not in ("d2t", "t2d")}
        head.load_state_dict({**state, "draft_vocab": draft_vocab})
        return head


def choose_draft_vocab(token_lists: list[list[int]], size: int, target_vocab: int) -> torch.Tensor:
    """The ``size`` target ids the draft may name: the most frequent in ``token_lists`` (ties: lower id first),
    then the lowest ids not yet taken (a BPE vocabulary lists its common merges first). Sorted ascending."""
    counts = Counter(token for tokens in token_lists for token in tokens)
    chosen = [token for token, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:size]
    taken = set(chosen)
    filler = (token for token in range(target_vocab) if token not in taken)
    while len(chosen) < size:
        chosen.append(next(filler))
    return torch.tensor(sorted(chosen), dtype=torch.long)


def target_to_draft(draft_vocab: torch.Tensor, target_vocab: int) -> torch.Tensor:
    """Map a target id to its draft id, -1 where the draft vocabulary lacks it."""
    mapping = torch.full((target_vocab,), -1, dtype=torch.long)
    mapping[draft_vocab] = torch.arange(len(draft_vocab))
    return mapping
