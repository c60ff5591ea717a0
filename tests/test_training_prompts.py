import json
import re
import sys
from pathlib import Path

import pytest

from helpers.training_prompts import training_prompts

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def suite_prompts() -> set[str]:
    rows = [json.loads(line) for line in (ROOT / "data" / "prompts" / "suite.jsonl").read_text().splitlines()]
    return {r["prompt"] for r in rows}


def test_the_sets_are_disjoint_from_each_other_and_from_the_suite():
    sets = {s: {p for _, p in training_prompts(1, s)} for s in ("base", "extra", "code", "shapes")}
    seen: set[str] = set()
    for prompts in sets.values():
        assert prompts and not prompts & seen
        seen |= prompts
    assert not seen & suite_prompts()
    assert {c for c, _ in training_prompts(1, "extra")} == {"structured", "creative"}
    assert {c for c, _ in training_prompts(1, "code")} == {c for c, _ in training_prompts(1, "shapes")} == {"structured"}


def test_the_shapes_set_keeps_off_the_suites_subjects():
    """Aimed at the suite's weak shapes, not at its answers: none of the suite's code, JSON or SQL subjects."""
    shapes = " ".join(p for _, p in training_prompts(1, "shapes")).lower()
    for subject in ("fibonacci", "lucas", "pell", "tribonacci", "primes?", "stack", "salary", "employees?", "invoice",
                    "old man", "paris", "ana lopez", "orders", "user profile", "books?"):
        assert not re.search(rf"\b{subject}\b", shapes), subject


def test_rows_are_read_by_set(tmp_path, monkeypatch):
    import train_drafts

    path = tmp_path / "completions.jsonl"
    rows = [{"prompt": "a"}, {"prompt": "b", "set": "base"}, {"prompt": "c", "set": "extra"}]  # no "set": base
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(train_drafts, "COMPLETIONS", path)
    assert [r["prompt"] for r in train_drafts.load_rows()] == ["a", "b"]
    assert [r["prompt"] for r in train_drafts.load_rows(("base", "extra"))] == ["a", "b", "c"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    with pytest.raises(SystemExit, match="extra"):
        train_drafts.load_rows(("base", "extra"))


def test_soft_labels_come_from_the_features_at_the_answer_positions(tmp_path, monkeypatch):
    import torch
    import train_drafts

    rows = [{"prompt": "a", "temperature": 0.0, "set": "base", "prompt_token_ids": [1, 2, 3], "token_ids": [4, 5]},
            {"prompt": "a", "temperature": 0.8, "set": "base", "prompt_token_ids": [1, 2, 3], "token_ids": [6]},
            {"prompt": "b", "temperature": 0.0, "set": "extra", "prompt_token_ids": [1], "token_ids": [7, 8, 9]},
            {"prompt": "c", "temperature": 0.0, "set": "code", "prompt_token_ids": [1, 2], "token_ids": [3]},
            {"prompt": "d", "temperature": 0.0, "set": "shapes", "prompt_token_ids": [1], "token_ids": [2]}]
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the features of each sequence: top ids at position t are (10 t + the row's number), one per position
    feats = [{"top_ids": torch.tensor([[10 * t + i, 0] for t in range(len(r["prompt_token_ids"]) + len(r["token_ids"]))]),
              "top_logprobs": torch.zeros(len(r["prompt_token_ids"]) + len(r["token_ids"]), 2)}
             for i, r in enumerate(rows)]
    torch.save(feats, tmp_path / "features.pt")
    monkeypatch.setattr(train_drafts, "COMPLETIONS", path)
    monkeypatch.setattr(train_drafts, "FEATURES", tmp_path / "features.pt")
    picked = [dict(rows[2]), dict(rows[0])]  # any order, any subset
    train_drafts.attach_soft_labels(picked)
    # position t predicts token t + 1: an answer of m tokens after n prompt tokens is predicted at n - 1 .. n + m - 2
    assert picked[0]["top_ids"][:, 0].tolist() == [2, 12, 22]
    assert picked[1]["top_ids"][:, 0].tolist() == [20, 30]
    torch.save(feats[:2], tmp_path / "features.pt")
    with pytest.raises(SystemExit, match="features"):
        train_drafts.attach_soft_labels(picked)
    torch.save([{k: v[:-1] for k, v in f.items()} for f in feats], tmp_path / "features.pt")  # made from other answers
    with pytest.raises(SystemExit, match="does not match"):
        train_drafts.attach_soft_labels(picked)


def test_the_soft_loss_is_cross_entropy_to_the_target_distribution():
    import torch
    import train_drafts
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2)).eval()
    row = {"prompt_token_ids": [1, 2, 3], "token_ids": [4, 5, 6], "category": "structured"}
    ids, mask, labels, loss_mask, soft = train_drafts.to_tensors([row])
    assert soft is None  # rows without the target's distribution train on its argmax
    hard, _ = train_drafts.hidden_to_loss(model, ids, mask, labels, loss_mask)
    # all of the target's mass on the label: the same loss as the argmax
    one_hot = (torch.tensor([[4, 0], [5, 0], [6, 0]]), torch.tensor([[0.0, -torch.inf]] * 3))
    same, _ = train_drafts.hidden_to_loss(model, ids, mask, labels, loss_mask, one_hot)
    assert torch.allclose(same, hard)
    # half the mass on another token: the loss is the mean of the two cross-entropies (top-k renormalised)
    half = (torch.tensor([[4, 9], [5, 9], [6, 9]]), torch.log(torch.full((3, 2), 0.25)))
    mixed, _ = train_drafts.hidden_to_loss(model, ids, mask, labels, loss_mask, half)
    other, _ = train_drafts.hidden_to_loss(model, ids, mask, torch.where(loss_mask, 9, labels), loss_mask)
    assert torch.allclose(mixed, (hard + other) / 2)


def test_generate_answers_only_the_sets_the_file_lacks(tmp_path, monkeypatch):
    import train_drafts

    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps({"prompt": s, "set": s}) + "\n" for s in train_drafts.PROMPT_SETS))
    monkeypatch.setattr(train_drafts, "COMPLETIONS", path)
    monkeypatch.setattr(train_drafts, "WORK", tmp_path)
    import vllm

    def no_engine(*args, **kwargs):
        raise AssertionError("every set is answered: no engine should start")

    monkeypatch.setattr(vllm, "LLM", no_engine)
    before = path.read_text()
    train_drafts.generate()
    assert path.read_text() == before
    path.write_text(before.splitlines(keepends=True)[0])  # the base set only: the others are missing
    with pytest.raises(AssertionError, match="no engine"):
        train_drafts.generate()


def test_features_are_appended_for_new_answers_only(tmp_path, monkeypatch):
    import torch
    import train_drafts
    import train_eagle3

    rows = [{"prompt": "a", "set": "base", "prompt_token_ids": [1, 2], "token_ids": [3]},
            {"prompt": "b", "set": "base", "prompt_token_ids": [1], "token_ids": [4, 5]}]
    path, feats = tmp_path / "completions.jsonl", tmp_path / "features.pt"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(train_drafts, "COMPLETIONS", path)
    monkeypatch.setattr(train_eagle3, "COMPLETIONS", path)
    monkeypatch.setattr(train_eagle3, "FEATURES", feats)
    monkeypatch.setattr(train_eagle3, "PROMPT_SETS", ("base",))
    torch.save([{"argmax": torch.zeros(3)}, {"argmax": torch.zeros(3)}], feats)
    train_eagle3.features()  # every row has its features: nothing to compute
    assert len(torch.load(feats)) == 2
    torch.save([{"argmax": torch.zeros(4)}], feats)  # made from another answer
    with pytest.raises(SystemExit, match="other answers"):
        train_eagle3.features()
