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
# Skipped only off the CPU build of vLLM. On it, a moved stand-in fails here, naming what moved (MissingStandIn).
pytestmark = pytest.mark.skipif(not cpu_expand_fix.cpu_build(), reason="vLLM's CPU stand-ins exist on its CPU build")
cpu_tl = cpu_expand_fix.stand_ins()


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


def test_a_moved_stand_in_fails_naming_it(monkeypatch):
    import vllm.utils

    cpu_expand_fix.unregister()
    monkeypatch.setitem(sys.modules, "vllm.utils.cpu_triton_utils", None)  # import now raises ImportError
    monkeypatch.delattr(vllm.utils, "cpu_triton_utils")
    with pytest.raises(cpu_expand_fix.MissingStandIn, match=r"vllm\.utils\.cpu_triton_utils"):
        cpu_expand_fix.register()
    monkeypatch.undo()
    monkeypatch.delattr(cpu_tl, "_expand_kernel_impl")
    with pytest.raises(cpu_expand_fix.MissingStandIn, match="_expand_kernel_impl"):
        cpu_expand_fix.self_check()
    monkeypatch.undo()
    cpu_expand_fix.register()


def test_with_triton_cpu_installed_the_stand_in_is_not_used(monkeypatch):
    """vLLM skips its CPU overrides when Triton has a CPU backend: the status says so instead of 'replaced'."""
    import vllm.triton_utils

    cpu_expand_fix.unregister()
    monkeypatch.setattr(vllm.triton_utils, "HAS_TRITON", True)
    monkeypatch.setitem(cpu_expand_fix._state, "original", None)
    cpu_expand_fix.register()
    status = cpu_expand_fix.status()
    assert status["affected"] is None and not status["active"] and status["reason"].startswith("not used: Triton")
    assert cpu_expand_fix.engine_sampling(None).state == "exact"
    monkeypatch.undo()
    cpu_expand_fix.register()
    assert cpu_expand_fix.status()["active"]


def test_sampling_states_refuse_only_a_defective_engine():
    cpu_expand_fix.register()
    assert cpu_expand_fix.status()["affected"]
    me = os.getpid()
    loaded = {"pid": me + 1, "process": "EngineCore", **cpu_expand_fix.status()}
    assert cpu_expand_fix.engine_sampling([loaded], exclude_pid=me).state == "corrected"
    server_only = {**loaded, "pid": me}  # only the launching process (or a server's API server) ran the plugin
    defective = cpu_expand_fix.engine_sampling([server_only], exclude_pid=me)
    assert defective.state == "defective" and "pip install -e" in defective.reason
    defective.check(0.0)  # greedy requests never use the expansion
    with pytest.raises(cpu_expand_fix.DefectiveSampling, match="T = 0.7"):
        defective.check(0.7)
    control = {**loaded, "active": False, "deliberately_off": True}
    cpu_expand_fix.engine_sampling([control], exclude_pid=me).check(1.0)  # a labelled negative control may sample


PLUGIN_IN_A_FOREIGN_SERVER = textwrap.dedent("""
    import json, logging, os
    from vllm.logger import init_logger  # vLLM's own logging set-up, as in a `vllm serve` the kit did not start
    before = (os.environ.get("VLLM_LOGGING_CONFIG_PATH"), logging.getLogger("vllm").level,
              [type(h).__name__ for h in logging.getLogger("vllm").handlers])
    from vllm.plugins import load_general_plugins
    load_general_plugins()  # loads the kit's entry point, as vLLM does in every process
    import helpers.cpu_expand_fix
    after = (os.environ.get("VLLM_LOGGING_CONFIG_PATH"), logging.getLogger("vllm").level,
             [type(h).__name__ for h in logging.getLogger("vllm").handlers])
    print(json.dumps({"before": before, "after": after, "active": helpers.cpu_expand_fix.status()["active"]}))
""")


def test_loading_the_plugin_leaves_a_foreign_servers_logging_alone():
    from helpers import logs

    env = {k: v for k, v in os.environ.items()
           if k not in ("VLLM_LOGGING_CONFIG_PATH", "VLLM_CONFIGURE_LOGGING", logs.LOG_FILE_ENV)}
    out = subprocess.run([sys.executable, "-c", PLUGIN_IN_A_FOREIGN_SERVER], cwd="/", env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["active"], "the entry point did not run: is the project installed (pip install -e .)?"
    assert seen["before"] == seen["after"], seen


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


DEFECT_SCRIPT = textwrap.dedent("""
    import json
    from helpers import cpu_expand_fix
    from helpers.distribution import homogeneity, token_counts
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.timing import run, sampling_params
    from helpers.workloads import prompts
    if __name__ == "__main__":
        n, position, k = 96, 2, 4
        # a creative prompt: its tokens at T = 1 are spread, so a wrong temperature shows (on the JSON prompt the
        # third token is nearly certain whatever the temperature: 48 samples did not tell the two apart there)
        prompt, params = prompts("creative", 1)[0], sampling_params(1.0, position + k + 2)
        baseline = token_counts(run(EngineSpec("cpu"), [prompt] * n, params, batch=True)["outputs"], position)
        shutdown_engine()
        with cpu_expand_fix.uncorrected():  # the labelled negative control: vLLM's stand-in as shipped
            defect = run(EngineSpec("cpu", "draft_model", k=k), [prompt] * n, params, batch=True)
            inside = cpu_expand_fix.kernel_in_use()
        after = cpu_expand_fix.kernel_in_use()
        shutdown_engine()
        test = homogeneity(baseline, token_counts(defect["outputs"], position))
        c = defect["counters"]
        print(json.dumps({"p": test["p_value"], "tv": test["tv"], "accepted": c.accepted, "proposed": c.draft_tokens,
                          "inside": inside, "after": after}))
""")


def test_the_chi_square_rejects_the_defect_itself(cpu_models):
    """The distribution test of notebook 02 must reject vLLM-CPU's sampler as shipped (a real engine inside
    uncorrected()), and leaving the block must put the corrected kernel back for every engine of the process."""
    from helpers.distribution import ALPHA

    if not cpu_expand_fix.self_check()[0]:
        pytest.skip("this vLLM has no defect to reject")
    out = subprocess.run([sys.executable, "-c", DEFECT_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    print(seen)
    assert seen["inside"] == "vLLM's stand-in" and seen["after"] == "corrected", seen
    # Acceptance alone is no signature here: the defect reads uninitialised memory, so what it accepts varies from run
    # to run (0 of 1,344 and 49 of 1,292 on two runs), and on a creative prompt at T = 1 the corrected engine accepts
    # little too. The distribution test is the check.
    assert seen["p"] < ALPHA, f"the test did not reject the defect: {seen}"
