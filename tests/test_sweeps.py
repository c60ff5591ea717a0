"""The sweep summaries' maths on hand-made rows, and the long-context prompts on the real tokenizer."""

import json

import pandas as pd
import pytest

from helpers.sweeps import batching_headroom, crossover, decode_breakdown, decode_findings, throughput_summary
from helpers.workloads import LONG_CONTEXT, chat_token_ids, load_suite, long_context_entries, long_context_prompt

META = {"hardware": "test", "profile": "cpu", "target": "t", "draft": "d", "k": 4, "temperature": 0.0,
        "repetitions": 2}


def batch_rows(n, arm, walls, tokens_each=10, accepted=0, drafts=0):
    method = "baseline" if arm == "baseline" else "draft_model"
    return [{**META, "method": method, "arm": arm, "concurrency": n, "repetition": rep, "prompt_index": i,
             "prompt_tokens": 30, "output_tokens": tokens_each, "run_wall_s": wall, "tpot_s": 0.01,
             "decode_s": wall - 0.2, "accepted": accepted / n, "verify_steps": tokens_each - 1 - accepted / n,
             "run_drafts": drafts,
             "run_draft_tokens": 4 * drafts, "run_accepted": accepted}
            for rep, wall in enumerate(walls) for i in range(n)]


def test_throughput_summary_pairs_repetitions_and_counts_the_whole_batch():
    runs = pd.DataFrame(batch_rows(4, "baseline", [2.0, 4.0]) + batch_rows(4, "spec", [1.0, 4.0], accepted=6, drafts=4))
    summary = throughput_summary(runs).set_index("arm")
    assert summary.loc["baseline", "tok_per_s"] == pytest.approx((20 + 10) / 2)  # median of 40/2 and 40/4
    assert summary.loc["spec", "speedup"] == pytest.approx((2.0 + 1.0) / 2)  # ratios 2.0 and 1.0 per repetition
    assert summary.loc["spec", "acceptance_rate"] == pytest.approx(12 / 32)
    assert summary.loc["spec", "mean_acceptance_length"] == pytest.approx(1 + 12 / 8)
    assert summary.loc["spec", "speedup_ci_low"] <= summary.loc["spec", "speedup"] <= summary.loc["spec", "speedup_ci_high"]
    # Each request: 9 decode tokens, 1.5 accepted: 7.5 steps; its decode time over them, median over requests
    assert summary.loc["spec", "request_tau"] == [pytest.approx(9 / 7.5)] * 4
    assert summary.loc["spec", "step_ms"] == pytest.approx(1000 * (0.8 + 3.8) / 2 / 7.5)
    assert summary.loc["spec", "baseline_step_ms"] == summary.loc["baseline", "step_ms"] == pytest.approx(
        1000 * (1.8 + 3.8) / 2 / 9)


def test_crossover_is_the_first_concurrency_whose_interval_loses():
    summary = pd.DataFrame({"arm": ["a"] * 4 + ["b"] * 2, "concurrency": [1, 2, 4, 8, 1, 8],
                            "speedup": [1.4, 0.98, 0.9, 0.7, 1.2, 0.97],
                            "speedup_ci_high": [1.5, 1.05, 0.95, 0.8, 1.3, 1.02]})
    assert crossover(summary, "a") == 4  # at 2 the median is below 1 but the interval reaches above it
    assert crossover(summary, "b") is None


def test_suite_has_eight_prompts_per_category():
    counts = load_suite()["category"].value_counts()
    assert counts.min() >= 8 and set(counts.index) == {"structured", "creative", LONG_CONTEXT}


def test_agent_loop_is_eight_distinct_requests_with_one_schema():
    from helpers.workloads import agent_loop_prompts

    loop = agent_loop_prompts()
    assert len(loop) >= 8 and len(set(loop)) == len(loop) and agent_loop_prompts(3) == loop[:3]
    schema = loop[0].split("Ticket")[0]  # the shared instruction: answers share spans with earlier answers
    assert all(p.startswith(schema) for p in loop)


def test_long_context_prompt_fits_the_length_and_keeps_the_answer(cpu_models):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(cpu_models)
    entries = long_context_entries()
    for length in (128, 700, 2000):
        message, n = long_context_prompt(tokenizer, length, entry=1)
        assert length - 60 <= n <= length  # cut at a line boundary: at most one line short
        assert n == len(chat_token_ids(tokenizer, message))
        assert message.endswith(entries[1]["question"])
        answer_line = json.loads(entries[1]["answer"])["day"]
        assert entries[1]["document"].splitlines()[answer_line - 1] in message
    with pytest.raises(ValueError, match="too short"):
        long_context_prompt(tokenizer, 40)


def _long_rows(vs, method, arm, length, **values):
    return {"vs": vs, "method": method, "arm": arm, "k": 4 if method != "baseline" else 0, "prompt_length": length,
            "prompt_tokens": length, **values}


def test_decode_findings_say_where_decode_itself_slowed_down():
    rows = []
    for length, ttft, tpot_ratio, steps, c_eff, draft_c in [(128, 0.1, 1.2, 2.4, 0.25, 0.2),
                                                             (2000, 1.5, 0.8, 2.2, 0.44, 0.35)]:
        rows.append(_long_rows("draft", "baseline", "baseline", length, ttft_s=ttft, e2e_s=ttft + 1.0))
        rows.append(_long_rows("draft", "draft_model", "draft", length, ttft_s=ttft * 1.1, e2e_s=0, speedup=0.9,
                               decode_speedup=tpot_ratio, decode_ci_low=tpot_ratio - 0.05,
                               decode_ci_high=tpot_ratio + 0.05, acceptance_rate=0.4,
                               tokens_per_verify_step=steps, c_eff=c_eff))
        rows.append(_long_rows("alone", "baseline", "baseline", length, ttft_s=ttft, e2e_s=ttft + 1.0))
        rows.append(_long_rows("alone", "draft_alone", "alone", length, ttft_s=ttft / 5, e2e_s=0, speedup=1 / draft_c,
                               decode_speedup=1 / draft_c))
    breakdown = decode_breakdown(pd.DataFrame(rows))
    assert list(breakdown["arm"]) == ["draft", "draft"]  # the draft served alone is a column, not an arm
    assert breakdown["draft_c"].tolist() == pytest.approx([0.2, 0.35])
    assert breakdown["prefill_share"].tolist() == pytest.approx([0.1 / 1.1, 1.5 / 2.5])
    text = "\n".join(decode_findings(breakdown))
    assert "at 2000 prompt tokens: decode itself slowed down, 0.80x" in text and "25% longer" in text
    assert "at 128 prompt tokens: decode itself" not in text
    # tokens per step x0.92, step cost 2.0 -> 2.76 (x1.38): the cost term moved more
    assert "because a decode step's cost grew" in text and "its draft prefills the prompt too" in text
    # at 128 tokens end to end lost (0.9x) while decode alone paid (1.2x): the extra prefill is named
    assert "at 128 prompt tokens: end to end 0.90x while decode alone was 1.20x" in text and "TTFT was 1.10x" in text


def test_decode_findings_need_the_whole_interval_below_one():
    row = {"arm": "a", "method": "ngram", "k": 4, "prompt_tokens": 500, "prefill_share": 0.5, "speedup": 1.0,
           "decode_speedup": 0.98, "decode_ci_low": 0.9, "decode_ci_high": 1.06, "acceptance_rate": float("nan"),
           "tokens_per_verify_step": float("nan"), "c_eff": float("nan"), "ttft_over_baseline": 1.0,
           "draft_c": float("nan")}
    text = "\n".join(decode_findings(pd.DataFrame([{**row, "prompt_length": 128}, {**row, "prompt_length": 512}])))
    assert "slowed down" not in text and "mostly because" not in text  # no cause stated from NaN terms



def test_batching_headroom_reports_the_baselines_own_gain():
    summary = pd.DataFrame({"arm": ["baseline"] * 3 + ["spec"], "vs": ["spec"] * 4, "concurrency": [1, 4, 16, 1],
                            "tok_per_s": [20.0, 60.0, 120.0, 25.0], "tpot_ms": [50.0, 60.0, 100.0, 40.0]})
    lines = batching_headroom(summary, "spec")
    assert "(x3.00); a decode step on 4 sequences took 1.20x a step on one" in lines[1]
    assert "16 sequences cost 2.00x a step on one" in lines[-1] and "left much" in lines[-1]
    busy = summary.assign(tpot_ms=[50.0, 150.0, 500.0, 40.0])
    assert "far from free" in batching_headroom(busy, "spec")[-1]  # 10x for 16 sequences: more than half of 16


def test_acceptance_per_prompt_does_not_depend_on_how_many_run_at_once(cpu_models):
    """Issue item: the same prompts at every concurrency. At T = 0 each prompt's own acceptance (vLLM's per-request
    counters) is the same whether its requests run one at a time, two at a time or all together."""
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.sweeps import acceptance
    from helpers.timing import request_timing, run, sampling_params
    from helpers.workloads import prompts

    spec, messages = EngineSpec("cpu", "draft_model", k=4), prompts("structured", 4)
    together = acceptance(spec, messages, 0.0, 32)
    assert (together["draft_tokens"] > 0).all() and together["accepted"].sum() > 0
    for concurrency in (1, 2):
        result = run(spec, messages, sampling_params(0.0, 32), concurrency=concurrency)
        accepted = [request_timing(o)["accepted"] for o in result["outputs"]]
        assert sum(accepted) == result["counters"].accepted  # per request adds up to the engine's own counter
        assert accepted == together["accepted"].tolist()
    shutdown_engine()
