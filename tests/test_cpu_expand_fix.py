"""The kit's correction of vLLM-CPU's expand kernel (vllm-project/vllm#55005), and the other CPU stand-ins
that sampled verification uses, each checked against a plain-torch reference; then real engines at T = 1."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from helpers import cpu_expand_fix
from helpers.cpu_expand_fix import expand_kernel_impl, expansion_errors

ROOT = Path(__file__).resolve().parent.parent
cpu_tl = cpu_expand_fix._cpu_stand_ins()
pytestmark = pytest.mark.skipif(cpu_tl is None, reason="vLLM's CPU stand-ins only exist on the CPU platform")


def vllm_expand_batch_to_tokens(x, cu_num_tokens):
    """vLLM's own ``expand_batch_to_tokens`` (the rejection sampler's temperature expansion), through the
    kernel override the CPU platform registers at engine start."""
    from vllm.platforms import current_platform
    from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens

    current_platform.register_triton_kernel_overrides()
    return expand_batch_to_tokens(x, cu_num_tokens, int(cu_num_tokens[-1]), replace_from=0, replace_to=1)


CU = torch.tensor([2, 3, 5], dtype=torch.int32)
CASES = [(torch.tensor([0.7, 0.0, 1.5]), [0.7, 0.7, 1.0, 1.5, 1.5]),
         (torch.tensor([5, 0, 7], dtype=torch.int32), [5, 5, 1, 7, 7])]


def test_pinned_vllm_has_the_defect():
    """Fails when an upgrade fixed vllm-project/vllm#55005: then delete helpers/cpu_expand_fix.py (its docstring)."""
    original = cpu_expand_fix._state["original"] or cpu_tl._expand_kernel_impl
    assert expansion_errors(original), "vLLM's CPU expand stand-in is exact now: the upstream fix has landed"
    affected, reason = cpu_expand_fix.self_check()
    assert affected is True and "#55005" in reason
    with cpu_expand_fix.uncorrected():
        for x, expected in CASES:
            got = vllm_expand_batch_to_tokens(x, CU)
            assert not torch.allclose(got.double(), torch.tensor(expected, dtype=torch.float64)), (x.dtype, got)


def test_correction_is_exact_in_vllms_own_expansion():
    assert expansion_errors(expand_kernel_impl) == []
    cpu_expand_fix.register()
    assert cpu_expand_fix.status()["active"] and cpu_tl._expand_kernel_impl is expand_kernel_impl
    for x, expected in CASES:
        got = vllm_expand_batch_to_tokens(x, CU)
        assert got.dtype == x.dtype and torch.allclose(got.double(), torch.tensor(expected, dtype=torch.float64))


def test_correction_writes_in_place_and_leaves_the_tail():
    out = torch.full((6,), -5.0)
    expand_kernel_impl(out, torch.tensor([0.25, 2.0]), torch.tensor([1, 4]), 0, 1)
    assert out.tolist() == [0.25, 2.0, 2.0, 2.0, -5.0, -5.0]


def test_a_fixed_vllm_is_left_untouched(monkeypatch):
    cpu_expand_fix.unregister()
    monkeypatch.setattr(cpu_tl, "_expand_kernel_impl", expand_kernel_impl)  # stands in for an upstream fix
    monkeypatch.setitem(cpu_expand_fix._state, "original", None)
    cpu_expand_fix.register()
    status = cpu_expand_fix.status()
    assert status["affected"] is False and not status["active"] and "nothing replaced" in status["reason"]


# --- The other CPU stand-ins on the sampled verification path, against plain torch ---------------------------

def reference_rejection(cu, draft_ids, draft_probs, target_probs, bonus, recovered, uniform, is_greedy, max_spec_len):
    out = torch.full((len(cu), max_spec_len + 1), -1, dtype=torch.int64)
    start = 0
    for req, end in enumerate(cu.tolist()):
        if is_greedy[req]:
            start = end
            continue
        rejected = False
        for pos in range(end - start):
            i = start + pos
            token = int(draft_ids[i])
            q = 1.0 if draft_probs is None else float(draft_probs[i, token])
            accepted = q > 0 and float(target_probs[i, token]) / q >= float(uniform[i])
            out[req, pos] = token if accepted else int(recovered[i])
            if not accepted:
                rejected = True
                break
        if not rejected:
            out[req, end - start] = int(bonus[req])
        start = end
    return out


def reference_recovered(cu, draft_ids, draft_probs, target_probs, inv_q):
    out = torch.empty(len(draft_ids), dtype=torch.int64)
    start = 0
    for req, end in enumerate(cu.tolist()):
        for i in range(start, end):
            if draft_probs is None:
                prob = target_probs[i].clone()
                prob[int(draft_ids[i])] = 0
            else:
                prob = (target_probs[i] - draft_probs[i]).clamp(min=0)
            out[i] = int(torch.argmax(prob * inv_q[req]))
        start = end
    return out


def random_batch(seed, vocab=16, drafts=(3, 1, 4), draft_probs=True):
    g = torch.Generator().manual_seed(seed)
    cu = torch.tensor(drafts, dtype=torch.int32).cumsum(0).to(torch.int32)
    n = int(cu[-1])
    target = torch.rand(n, vocab, generator=g).softmax(-1)
    draft = torch.rand(n, vocab, generator=g).softmax(-1) if draft_probs else None
    return dict(cu=cu, draft_ids=torch.randint(0, vocab, (n,), generator=g, dtype=torch.int32),
                draft_probs=draft, target_probs=target, g=g, n=n, vocab=vocab)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_draft_probs", [True, False])
def test_rejection_random_sample_stand_in_matches_reference(seed, with_draft_probs):
    b = random_batch(seed, draft_probs=with_draft_probs)
    batch, max_spec_len = len(b["cu"]), 4
    bonus = torch.randint(0, b["vocab"], (batch,), generator=b["g"])
    recovered = torch.randint(0, b["vocab"], (b["n"],), generator=b["g"], dtype=torch.int32)
    # uniforms spread so that some tokens are accepted and some rejected
    uniform = torch.rand(b["n"], generator=b["g"], dtype=torch.float64) * 0.2
    is_greedy = torch.tensor([False, True, False]) if seed % 2 else torch.zeros(batch, dtype=torch.bool)
    out = torch.full((batch, max_spec_len + 1), -1, dtype=torch.int32)
    cpu_tl._rejection_random_sample_kernel_impl(out, b["cu"], b["draft_ids"], b["draft_probs"], b["target_probs"],
                                               bonus, recovered, uniform, is_greedy, max_spec_len, b["vocab"],
                                               NO_DRAFT_PROBS=not with_draft_probs)
    expected = reference_rejection(b["cu"], b["draft_ids"], b["draft_probs"], b["target_probs"], bonus, recovered,
                                   uniform.float(), is_greedy, max_spec_len)
    assert torch.equal(out.long(), expected)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_draft_probs", [True, False])
def test_sample_recovered_tokens_stand_in_matches_reference(seed, with_draft_probs):
    b = random_batch(seed, vocab=40, draft_probs=with_draft_probs)
    inv_q = 1 / torch.empty(len(b["cu"]), b["vocab"]).exponential_(generator=b["g"])
    out = torch.full((b["n"],), -1, dtype=torch.int32)
    cpu_tl._sample_recovered_tokens_kernel_impl(out, b["cu"], b["draft_ids"], b["draft_probs"], b["target_probs"],
                                               inv_q, b["vocab"], NO_DRAFT_PROBS=not with_draft_probs)
    assert torch.equal(out.long(), reference_recovered(b["cu"], b["draft_ids"], b["draft_probs"], b["target_probs"],
                                                       inv_q))


# --- Real engines at T = 1: sampled verification accepts draft tokens (in-process; served: test_serving_vllm) ---

ACCEPTANCE_SCRIPT = textwrap.dedent("""
    import json
    from helpers import cpu_expand_fix
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.timing import run, sampling_params
    from helpers.workloads import prompts
    if __name__ == "__main__":
        rates = {}
        for spec in (EngineSpec("cpu", "draft_model", k=4), EngineSpec("cpu", "draft_model", k=4,
                     draft_sample_method="probabilistic"), EngineSpec("cpu", "ngram", k=4)):
            c = run(spec, prompts("structured", 4), sampling_params(1.0, 48), batch=True)["counters"]
            rates[spec.label() + " " + spec.draft_sample_method] = [c.accepted, c.draft_tokens]
            shutdown_engine()
        print(json.dumps(rates))
""")


# In-process, all three arms. vLLM's multiprocess engine (EngineCore and Worker in their own processes) is checked at
# T = 1 through a real server in tests/test_serving_vllm.py: the kit's vLLM plugin must load in those processes too.
def test_sampled_verification_accepts_draft_tokens(cpu_models):
    out = subprocess.run([sys.executable, "-c", ACCEPTANCE_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rates = json.loads(out.stdout.strip().splitlines()[-1])
    print(rates)
    assert len(rates) == 3
    for arm, (accepted, proposed) in rates.items():
        assert proposed > 0 and accepted / proposed > 0.05, f"{arm} at T=1: {accepted} of {proposed} accepted"
