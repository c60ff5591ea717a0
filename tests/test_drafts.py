import pytest

from helpers.drafts import ADVICE, KIT_REFUSES, RULES, VLLM_NEEDS_OPTION, check_draft, usable


def by_name(checks):
    return {c.name: c for c in checks}


TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8, "num_attention_heads": 4,
        "vocab_size": 1000, "model_type": "llama"}


def test_the_talks_pair_is_usable():
    checks = by_name(check_draft("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"))
    assert all(c.ok for c in checks.values())
    assert "15.4%" in checks["draft much smaller"].reason


def test_each_check_says_who_enforces_it():
    rules = {c.name: c.rule for c in check_draft(TINY, {**TINY, "num_hidden_layers": 1})}
    assert rules == {"same vocabulary size": VLLM_NEEDS_OPTION, "draft much smaller": KIT_REFUSES,
                     "same family": ADVICE}
    assert set(rules.values()) <= set(RULES)
    vocab = by_name(check_draft(TINY, {**TINY, "vocab_size": 999}))["same vocabulary size"]
    assert "use_heterogeneous_vocab" in vocab.reason and "verify_equal_vocab_size_if_draft_model" in vocab.reason


def test_tokenizer_check_is_the_kits(cpu_models):
    from helpers.models import draft_dir, read_manifest

    draft = draft_dir(next(iter(read_manifest()["drafts"])))
    tokenizer = by_name(check_draft(cpu_models, draft))["same tokenizer"]
    assert tokenizer.ok and tokenizer.rule == KIT_REFUSES and "does not compare tokenizers" in tokenizer.reason


def test_vocabulary_mismatch_is_what_vllm_refuses():
    mixed = check_draft("Qwen/Qwen3-8B", "meta-llama/Llama-3.2-1B-Instruct")
    assert not usable(mixed)
    names = {c.name for c in mixed if not c.ok}
    assert names == {"same vocabulary size", "same family"}
    assert "151,936" in by_name(mixed)["same vocabulary size"].reason


def test_an_oversized_draft_runs_in_vllm_but_the_kit_refuses_it():
    # vLLM compares no sizes: usable() (vLLM runs it) holds, while the kit's engines refuse the pair
    reversed_pair = by_name(check_draft("meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"))
    assert usable(list(reversed_pair.values()))
    smaller = reversed_pair["draft much smaller"]
    assert not smaller.ok and smaller.rule == KIT_REFUSES and smaller.stops_engine
    assert "vLLM does not compare sizes" in smaller.reason


def test_family_is_advice_not_a_requirement():
    checks = check_draft(TINY, {**TINY, "num_hidden_layers": 1, "model_type": "mistral"})
    family = by_name(checks)["same family"]
    assert usable(checks) and not family.ok and not family.stops_engine


def test_malformed_config_is_refused():
    with pytest.raises(ValueError, match="malformed"):
        check_draft({"hidden_size": 1}, "Qwen/Qwen3-0.6B")


def test_retrained_drafts_are_checked_against_the_committed_agreement():
    from helpers.models import agreement_changes

    committed = {"drafts": {"2l": {"heldout_top1_agreement": {"structured": 0.52, "creative": 0.33}}},
                 "eagle3": {"eagle3": {"heldout_top1_agreement": {"structured": 0.60}}}}
    close = {"drafts": {"2l": {"heldout_top1_agreement": {"structured": 0.535, "creative": 0.315}}},
             "eagle3": {"eagle3": {"heldout_top1_agreement": {"structured": 0.59}}}}
    assert agreement_changes(committed, close) == []
    far = {"drafts": {"2l": {"heldout_top1_agreement": {"structured": 0.49, "creative": 0.33}}}}
    problems = agreement_changes(committed, far)
    assert any("2l structured" in p for p in problems) and any("eagle3 eagle3: not re-trained" in p for p in problems)
    assert len(problems) == 2
