"""The EAGLE-3 head: its training-time test must compute what step-by-step drafting computes, and it must save in
the layout vLLM's LlamaForCausalLMEagle3 loads."""

import json

import pytest
import torch

from helpers.eagle3 import AUX_LAYERS, Eagle3Head, choose_draft_vocab, target_to_draft

CONFIG = {"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 50,
          "max_position_embeddings": 128, "bos_token_id": 1, "eos_token_id": 2}


def small_head(seed: int = 0) -> Eagle3Head:
    torch.manual_seed(seed)
    head = Eagle3Head(CONFIG, torch.tensor([0, 3, 5, 7, 11, 13, 17, 19, 23, 29]))
    with torch.no_grad():
        for p in head.parameters():
            p.normal_(0, 0.3)
    return head.eval()


def test_unroll_matches_drafting_one_position_at_a_time():
    """What vLLM does at a draft: step 0 over the context (target features, causal), then each further step at
    one new position, reading the previous step's pre-norm output and attending to step 0's keys up to the last
    accepted index plus its own earlier draft positions."""
    head, t, steps = small_head(), 9, 3
    features = torch.randn(1, t, len(AUX_LAYERS) * 32)
    embed_next = torch.randn(1, t + steps, 32)
    with torch.no_grad():
        unrolled = head.unroll(features, embed_next, torch.ones(1, t, dtype=torch.bool), steps)
        hidden = head.fc(features)
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool))[None]
        normed0, pre0, k0, v0 = head.step(embed_next[:, :t], hidden, torch.arange(t)[None], [], [], causal)
        assert torch.allclose(unrolled[0], normed0, atol=1e-5)
        for p in range(t):  # the last accepted index
            keys, values, pre = [k0[:, :, : p + 1]], [v0[:, :, : p + 1]], pre0[:, p : p + 1]
            for s in range(1, steps):
                mask = torch.ones(1, 1, p + 1 + s, dtype=torch.bool)
                normed, pre, k, v = head.step(embed_next[:, p + s : p + s + 1], pre, torch.tensor([[p + s]]),
                                              keys, values, mask)
                keys, values = keys + [k], values + [v]
                assert torch.allclose(unrolled[s][:, p], normed[:, 0], atol=1e-5), (p, s)


def test_padding_does_not_change_real_positions():
    head, t, steps = small_head(1), 7, 2
    features, embed_next = torch.randn(1, t, 96), torch.randn(1, t + steps, 32)
    padded_features = torch.cat([features, torch.randn(1, 3, 96)], dim=1)
    padded_embeds = torch.cat([embed_next[:, :t], torch.randn(1, 3, 32), embed_next[:, t:]], dim=1)
    valid = torch.tensor([[True] * t + [False] * 3])
    with torch.no_grad():
        alone = head.unroll(features, embed_next, torch.ones(1, t, dtype=torch.bool), steps)
        padded = head.unroll(padded_features, padded_embeds, valid, steps)
    # step 0 reads only real keys; later steps' inputs at real indices near the end read padding tokens, so
    # compare the indices whose inputs are all real
    assert torch.allclose(alone[0], padded[0][:, :t], atol=1e-5)
    assert torch.allclose(alone[1][:, : t - 1], padded[1][:, : t - 1], atol=1e-5)


def test_draft_vocabulary_takes_frequent_tokens_then_low_ids():
    vocab = choose_draft_vocab([[9, 9, 9, 4, 4, 30], [30, 30, 30, 7]], size=5, target_vocab=50)
    assert vocab.tolist() == [0, 4, 7, 9, 30]  # four seen tokens, then the lowest free id; ascending
    assert choose_draft_vocab([[9, 9, 4, 30]], size=2, target_vocab=50).tolist() == [4, 9]  # ties: lower id
    mapping = target_to_draft(vocab, 50)
    assert mapping[vocab].tolist() == list(range(5))
    assert (mapping >= 0).sum() == 5


def test_saved_head_has_vllm_layout_and_reads_back(tmp_path):
    head = small_head(2)
    out = head.save(tmp_path / "eagle3")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["draft_vocab_size"] == 10 and config["vocab_size"] == 50
    assert config["eagle_aux_hidden_state_layer_ids"] == list(AUX_LAYERS)
    from safetensors.torch import load_file

    tensors = load_file(out / "model.safetensors")
    assert (torch.arange(10) + tensors["d2t"]).tolist() == head.draft_vocab.tolist()
    assert tensors["t2d"].sum() == 10 and tensors["t2d"][head.draft_vocab].all()
    assert "midlayer.self_attn.q_proj.weight" in tensors and tensors["midlayer.self_attn.q_proj.weight"].shape == (32, 64)
    assert not any("embed_tokens" in name for name in tensors)
    back = Eagle3Head.load(out, CONFIG)
    assert torch.allclose(back.fc.weight, head.fc.weight.to(torch.bfloat16).float())


@pytest.mark.parametrize("size", [3, 10])
def test_draft_vocabulary_size_is_exact(size):
    assert len(choose_draft_vocab([[1, 2, 3, 4, 5, 6]], size=size, target_vocab=50)) == size


def test_the_heads_table_reads_the_committed_manifest():
    from helpers.models import eagle_heads, read_eagle_manifest

    table, manifest = eagle_heads(), read_eagle_manifest()
    assert list(table.index) == list(manifest) and len(table) >= 1
    for name, row in table.iterrows():
        assert row["draft vocabulary"] == manifest[name]["draft_vocab_size"]
        assert row["held-out top-1 agreement (structured)"] == manifest[name]["heldout_top1_agreement"]["structured"]
        assert row["MB (bf16)"] == pytest.approx(manifest[name]["bytes_bf16"] / 1e6, abs=0.05)
