"""Train the `cpu` profile's EAGLE-3 head (``helpers.eagle3``) from the target's own features, on the CPU.

Needs ``build/train/completions.jsonl`` from ``python scripts/train_drafts.py generate`` (its base set: the answers
the small drafts learn from, with the same held-out prompts).

Stage 1 (``features``): one pass of the target (Hugging Face, float32) over every prompt + answer keeps its hidden
states after layers 2, 15 and 27 (float16), its argmax next token and its top-20 log-probabilities at each
position: ``build/train/eagle3_features.pt`` (answers appended since it was made: theirs only, added after the others).
Stage 2 (``train``): the head learns the target's next token from those features with a training-time test of
``--steps`` draft positions. ``--soft`` trains on the target's distribution (cross-entropy to its top-20
probabilities, renormalised over the draft vocabulary) instead of its argmax: a calibrated head for sampled
drafting at T > 0. ``--sets`` picks the prompt sets it learns from (``helpers.training_prompts``; held out: the
base set's held-out prompts, so every head is scored on the same answers). The head goes to ``drafts/NAME/``
(config.json + bf16 safetensors, vLLM's ``LlamaForCausalLMEagle3`` layout) and is described in
``drafts/eagle3.json``. The committed heads (``make drafts``): ``eagle3``, the kit's, soft labels on the base and
extra sets; ``eagle3-hard`` and ``eagle3-soft``, argmax and distribution on the base set alone.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_drafts import (  # noqa: E402
    COMPLETIONS,
    FEATURES,
    PROMPT_SETS,
    SEED,
    load_rows,
    prompt_set,
    rows_with_features,
    split_rows,
    update,
)

from helpers.eagle3 import AUX_LAYERS, Eagle3Head, choose_draft_vocab, target_to_draft  # noqa: E402
from helpers.models import DRAFTS_DIR, EAGLE_MANIFEST, TARGET_DIR, sha256_of  # noqa: E402

TOP = 20


def features() -> None:
    from transformers import AutoModelForCausalLM

    rows, out, start = load_rows(PROMPT_SETS), [], time.perf_counter()
    if FEATURES.exists():  # the rows of a set appended since: their features only, after the others
        out = torch.load(FEATURES)
        if len(out) > len(rows) or any(len(f["argmax"]) != len(r["prompt_token_ids"]) + len(r["token_ids"])
                                       for r, f in zip(rows, out)):
            raise SystemExit(f"{FEATURES} was made from other answers than {COMPLETIONS}: remove it and run again")
        if len(out) == len(rows):
            FEATURES.touch()
            return
    target = AutoModelForCausalLM.from_pretrained(TARGET_DIR, dtype=torch.float32).eval()
    with torch.no_grad():
        for n, row in enumerate(rows[len(out):], start=len(out)):
            ids = torch.tensor([row["prompt_token_ids"] + row["token_ids"]])
            result = target(input_ids=ids, output_hidden_states=True)
            logprobs = result.logits[0].log_softmax(-1)
            top = logprobs.topk(TOP, dim=-1)
            out.append({
                "aux": torch.cat([result.hidden_states[i][0] for i in AUX_LAYERS], dim=-1).half(),
                "argmax": logprobs.argmax(-1), "top_ids": top.indices.int(), "top_logprobs": top.values.half(),
            })
            if (n + 1) % 50 == 0:
                print(f"features {n + 1}/{len(rows)} {time.perf_counter() - start:.0f} s", flush=True)
    torch.save(out, FEATURES)
    print(f"features of {len(rows)} sequences in {time.perf_counter() - start:.0f} s -> {FEATURES}", flush=True)


def rows_and_features(prompt_sets: tuple[str, ...]) -> tuple[list[dict], list[dict]]:
    """The completions of ``prompt_sets`` and the target's features for each (``features`` ran over every set)."""
    picked = [(r, f) for r, f in rows_with_features() if prompt_set(r) in prompt_sets]
    return [r for r, _ in picked], [f for _, f in picked]


def batch_tensors(rows, feats, embed, to_draft, steps: int):
    """Pad a batch. Labels at (step s, index i): the target's next token after index i + 1 + s, on answers only."""
    seqs = [r["prompt_token_ids"] + r["token_ids"] for r in rows]
    b, t = len(seqs), max(len(s) for s in seqs)
    aux = torch.zeros(b, t, feats[0]["aux"].shape[-1])
    next_ids = torch.zeros(b, t + steps, dtype=torch.long)
    valid = torch.zeros(b, t, dtype=torch.bool)
    labels = torch.full((steps, b, t), -1, dtype=torch.long)  # target ids, -1: no loss
    top_ids = torch.zeros(steps, b, t, TOP, dtype=torch.long)
    top_logprobs = torch.full((steps, b, t, TOP), -torch.inf)
    for j, (row, seq, f) in enumerate(zip(rows, seqs, feats)):
        n, length = len(row["prompt_token_ids"]), len(seq)
        aux[j, :length] = f["aux"].float()
        next_ids[j, : length - 1] = torch.tensor(seq[1:])
        valid[j, :length] = True
        for s in range(steps):
            # index i, step s predicts what follows position p = i + 1 + s; answers: n - 1 <= p <= length - 2
            first, last = max(n - 2 - s, 0), length - 3 - s
            if last < first:
                continue
            p = torch.arange(first, last + 1) + 1 + s
            labels[s, j, first:last + 1] = f["argmax"][p]
            top_ids[s, j, first:last + 1] = f["top_ids"][p].long()
            top_logprobs[s, j, first:last + 1] = f["top_logprobs"][p].float()
    return aux, embed(next_ids), valid, labels, to_draft[labels.clamp(min=0)].masked_fill(labels < 0, -1), \
        top_ids, top_logprobs


def step_losses(head, batch, to_draft, steps: int, soft: bool):
    aux, embeds, valid, labels, draft_labels, top_ids, top_logprobs = batch
    outputs = head.unroll(aux, embeds, valid, steps)
    losses, hits = [], []
    for s, normed in enumerate(outputs):
        where = labels[s] >= 0
        logits = head.lm_head(normed[where]).log_softmax(-1)
        if soft:
            ids = to_draft[top_ids[s][where]]
            probs = top_logprobs[s][where].exp() * (ids >= 0)
            probs = probs / probs.sum(-1, keepdim=True).clamp(min=1e-9)
            loss = -(probs * logits.gather(-1, ids.clamp(min=0))).sum(-1).mean()
        else:
            loss = F.nll_loss(logits, draft_labels[s][where], ignore_index=-1)
        losses.append(loss)
        hits.append(head.draft_vocab[logits.argmax(-1)] == labels[s][where])
    return losses, hits


def agreement(head, rows, feats, embed, to_draft, steps: int) -> dict[str, list[float]]:
    """Per category, top-1 agreement with the target at each draft position (the head's own features after the
    first; the true tokens as inputs), on held-out answers."""
    totals: dict[str, list[list[int]]] = {}
    with torch.no_grad():
        for row, f in zip(rows, feats):
            _, hits = step_losses(head, batch_tensors([row], [f], embed, to_draft, steps), to_draft, steps, False)
            acc = totals.setdefault(row["category"], [[0, 0] for _ in range(steps)])
            for s, h in enumerate(hits):
                acc[s][0] += int(h.sum())
                acc[s][1] += int(h.numel())
    return {cat: [round(ok / max(n, 1), 4) for ok, n in acc] for cat, acc in sorted(totals.items())}


def train(steps: int, epochs: int, batch: int, lr: float, vocab: int, soft: bool, prompt_sets: tuple[str, ...],
          name: str, out_dir: Path = DRAFTS_DIR, sequences: int | None = None, bf16: bool = False) -> None:
    from safetensors.torch import load_file

    torch.manual_seed(SEED)
    rows, feats = rows_and_features(prompt_sets)
    by_prompt = {id(r): f for r, f in zip(rows, feats)}
    train_rows, held_rows = split_rows(rows)
    # held out: the base set's held-out prompts, whatever sets the head learnt from, so heads compare
    held_rows = [r for r in held_rows if prompt_set(r) == "base"]
    if sequences is not None:  # a seeded random subset of the training answers (scripts/eagle3_data_curve.py)
        if not 0 < sequences <= len(train_rows):
            raise SystemExit(f"--sequences must be in 1..{len(train_rows)}, got {sequences}")
        keep = set(random.Random(SEED).sample(range(len(train_rows)), sequences))
        train_rows = [r for i, r in enumerate(train_rows) if i in keep]
    train_feats, held_feats = [by_prompt[id(r)] for r in train_rows], [by_prompt[id(r)] for r in held_rows]
    config = json.loads((TARGET_DIR / "config.json").read_text())
    weights = load_file(TARGET_DIR / "model.safetensors")
    embedding = weights["model.embed_tokens.weight"]
    embed = torch.nn.Embedding.from_pretrained(embedding, freeze=True)

    answers = [f["argmax"][len(r["prompt_token_ids"]) - 1:].tolist() for r, f in zip(train_rows, train_feats)]
    draft_vocab = choose_draft_vocab(answers, vocab, config["vocab_size"])
    to_draft = target_to_draft(draft_vocab, config["vocab_size"])
    head = Eagle3Head(config, draft_vocab)
    last = config["num_hidden_layers"] - 1
    with torch.no_grad():  # start from the target's last layer, final norm and (tied) head rows
        for layer in ("o_proj", "gate_proj", "up_proj", "down_proj"):
            kind = "self_attn" if layer == "o_proj" else "mlp"
            getattr(head, layer).weight.copy_(weights[f"model.layers.{last}.{kind}.{layer}.weight"])
        head.norm.weight.copy_(weights["model.norm.weight"])
        head.lm_head.weight.copy_(embedding[draft_vocab])
    held_coverage = sum(int((to_draft[f["argmax"][len(r["prompt_token_ids"]) - 1:]] >= 0).sum())
                        for r, f in zip(held_rows, held_feats)) / sum(
        len(f["argmax"]) - len(r["prompt_token_ids"]) + 1 for r, f in zip(held_rows, held_feats))
    print(f"{len(train_rows)} training sequences, {len(held_rows)} held out; draft vocabulary {vocab} covers "
          f"{held_coverage:.1%} of held-out target tokens", flush=True)

    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    total = epochs * -(-len(train_rows) // batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=total, pct_start=0.1)
    rng, start, step = random.Random(SEED), time.perf_counter(), 0
    before = agreement(head.eval(), held_rows, held_feats, embed, to_draft, steps)
    head.train()
    for epoch in range(epochs):
        order = list(range(len(train_rows)))
        rng.shuffle(order)
        for first in range(0, len(order), batch):
            picked = order[first:first + batch]
            data = batch_tensors([train_rows[i] for i in picked], [train_feats[i] for i in picked], embed,
                                 to_draft, steps)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                losses, _ = step_losses(head, data, to_draft, steps, soft)
            update(sum(0.8**s * value for s, value in enumerate(losses)), params, optimizer, schedule)
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step}/{total} loss {' '.join(f'{v.item():.2f}' for v in losses)} "
                      f"{time.perf_counter() - start:.0f} s", flush=True)
    seconds = round(time.perf_counter() - start)
    after = agreement(head.eval(), held_rows, held_feats, embed, to_draft, steps)
    out = head.save(out_dir / name)
    manifest_path = out_dir / EAGLE_MANIFEST.name
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest[name] = {
        "dir": out.name, "method": "eagle3", "labels": "target top-20 distribution" if soft else "target argmax",
        "aux_layers": list(AUX_LAYERS), "draft_vocab_size": vocab, "heldout_vocab_coverage": round(held_coverage, 4),
        "parameters": sum(p.numel() for n, p in head.named_parameters()),
        "bytes_bf16": (out / "model.safetensors").stat().st_size,
        "training_steps": step, "epochs": epochs, "batch": batch, "learning_rate": lr, "ttt_steps": steps,
        "seed": SEED, "prompt_sets": list(prompt_sets), "training_sequences": len(train_rows),
        "training_seconds": seconds, **({"autocast": "bfloat16"} if bf16 else {}),
        "heldout_top1_agreement_before": {c: v[0] for c, v in before.items()},
        "heldout_top1_agreement": {c: v[0] for c, v in after.items()},
        "heldout_agreement_by_draft_position": after,
        "sha256": sha256_of(out / "model.safetensors"),
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{name}: agreement {before} -> {after} in {seconds} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    sub.add_parser("features")
    t = sub.add_parser("train")
    t.add_argument("--steps", type=int, default=4, help="draft positions in the training-time test")
    t.add_argument("--epochs", type=int, default=8)
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--vocab", type=int, default=8192)
    t.add_argument("--soft", action="store_true", help="learn the target's distribution, not its argmax")
    t.add_argument("--sets", nargs="+", default=["base"], choices=PROMPT_SETS,
                   help="prompt sets to learn from (helpers.training_prompts)")
    t.add_argument("--name", help="the head's folder and eagle3.json entry (default: eagle3-hard or eagle3-soft; the kit's head is eagle3)")
    t.add_argument("--sequences", type=int, help="learn from a seeded random subset of this many training answers")
    t.add_argument("--bf16", action="store_true", help="forward passes under bfloat16 autocast (fast where the CPU "
                   "has AVX512-BF16 or AMX; the weights and the optimizer stay float32)")
    t.add_argument("--out-dir", type=Path, default=DRAFTS_DIR, help="where the head and eagle3.json go (a re-run "
                   "to compare with the committed one: somewhere else)")
    args = parser.parse_args()
    if args.stage == "features":
        features()
    else:
        name = args.name or ("eagle3-soft" if args.soft else "eagle3-hard")
        train(args.steps, args.epochs, args.batch, args.lr, args.vocab, args.soft, tuple(args.sets), name, args.out_dir,
              args.sequences, args.bf16)


if __name__ == "__main__":
    main()
