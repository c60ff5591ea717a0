"""helpers.served without a server: plan and prompt checks, the measurement loop with stand-ins for the server and
the benchmark client, speedups paired by repetition on hand-made rows, the prediction comparison, the direction
sentences against 04 and 06, and the ITL pitfall."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from helpers import bench, checklist, served, served_findings, serving, speed_model
from helpers.metrics import SpecCounters
from helpers.profiles import Profile

words = lambda prompt: len(prompt.split())  # a token counter for tests: one token per word
PROFILE = Profile(name="test", description="", target="tiny", drafts={"d": "tiny-draft"}, default_draft="d", k=4,
                  dtype="float32", max_model_len=64, device="cpu")
PLAN = dict(profile=PROFILE, max_tokens=8, temperature=0.0, concurrencies=[1, 4], repetitions=2, tokenizer=words)


def run(method, concurrency, repetition, throughput, *, tpot=20.0, itl=20.0, e2el=1000.0, drafts=0, draft_tokens=0,
        accepted=0, tokens_per_request=48.0, num_prompts=8):
    """One hand-made row as served.measure writes it (only the columns the analysis reads)."""
    return {"method": method, "concurrency": concurrency, "repetition": repetition, "output_throughput": throughput,
            "median_tpot_ms": tpot, "median_itl_ms": itl, "median_e2el_ms": e2el, "median_ttft_ms": 50.0,
            "drafts": drafts, "draft_tokens": draft_tokens, "accepted_tokens": accepted,
            "tokens_per_request": tokens_per_request, "num_prompts": num_prompts, "source": served.KIT_PROMPTS,
            "max_tokens": 48}


# ------------------------------------------------------------------------------------------- speedups


def test_speedups_pair_repetition_with_repetition_and_label_a_range():
    rows = [run("baseline", 1, r, t) for r, t in enumerate([10.0, 20.0, 10.0])]
    rows += [run("draft_model", 1, r, t) for r, t in [(2, 30.0), (0, 15.0), (1, 20.0)]]  # out of order on purpose
    gain = served.speedups(pd.DataFrame(rows)).iloc[0]
    # pairs by repetition: 15/10, 20/20, 30/10 -> 1.5, 1.0, 3.0 (by row order they would be 3.0, 0.75, 2.0)
    assert gain["pairs"] == 3 and gain["repetitions"] == 3
    assert gain["speedup"] == pytest.approx(1.5)
    assert (gain["speedup_ci_low"], gain["speedup_ci_high"]) == pytest.approx((1.0, 3.0))
    assert gain["interval"].startswith("range of 3 pairs") and "95%" not in gain["interval"]
    assert gain["verdict"] == "too few repetitions to call"
    assert gain["tok_per_s"] == pytest.approx(20.0) and gain["baseline_tok_per_s"] == pytest.approx(10.0)


@pytest.mark.parametrize("ratio, expected", [(1.4, "PAID"), (0.6, "LOST")])
def test_six_repetitions_give_a_ci_and_a_verdict(ratio, expected):
    base = [10.0, 11.0, 9.0, 10.5, 9.5, 10.2]
    rows = [run("baseline", 4, r, t) for r, t in enumerate(base)]
    rows += [run("ngram", 4, r, t * ratio * (1 + 0.01 * r)) for r, t in enumerate(base)]
    gain = served.speedups(pd.DataFrame(rows)).iloc[0]
    assert gain["interval"].startswith("95% CI") and gain["pairs"] == 6
    assert gain["interval"].endswith("for this prompt set")  # a pair is a run over all prompts, not one prompt
    assert gain["verdict"] == expected


def test_no_clear_effect_when_the_interval_holds_one():
    ratios = [1.2, 0.8, 1.1, 0.9, 1.05, 0.95]
    rows = [run("baseline", 1, r, 10.0) for r in range(6)] + [run("ngram", 1, r, 10 * x) for r, x in enumerate(ratios)]
    assert served.speedups(pd.DataFrame(rows)).iloc[0]["verdict"] == "no clear effect"


def test_a_missing_baseline_repetition_drops_that_pair_only():
    rows = [run("baseline", 1, 0, 10.0), run("baseline", 1, 2, 10.0)]
    rows += [run("draft_model", 1, r, 12.0) for r in range(3)]
    gain = served.speedups(pd.DataFrame(rows)).iloc[0]
    assert gain["pairs"] == 2 and gain["repetitions"] == 3 and gain["interval"].startswith("range of 2 pairs")


def test_each_concurrency_is_paired_with_its_own_baseline():
    rows = [run("baseline", 1, 0, 10.0), run("baseline", 8, 0, 40.0),
            run("draft_model", 1, 0, 15.0), run("draft_model", 8, 0, 30.0)]
    gains = served.speedups(pd.DataFrame(rows)).set_index("concurrency")["speedup"]
    assert gains.to_dict() == pytest.approx({1: 1.5, 8: 0.75})


def test_speedups_need_a_baseline():
    with pytest.raises(ValueError, match="baseline"):
        served.speedups(pd.DataFrame([run("ngram", 1, 0, 10.0)]))


def test_acceptance_is_pooled_over_repetitions():
    rows = [run("baseline", 1, r, 10.0) for r in range(2)]
    rows += [run("draft_model", 1, 0, 12.0, drafts=10, draft_tokens=40, accepted=10),
             run("draft_model", 1, 1, 12.0, drafts=30, draft_tokens=120, accepted=70)]
    gain = served.speedups(pd.DataFrame(rows)).iloc[0]
    assert gain["acceptance_rate"] == pytest.approx(80 / 160)  # not the mean of 0.25 and 0.58
    assert gain["mean_acceptance_length"] == pytest.approx(1 + 80 / 40)


# ------------------------------------------------------------------------------------------- the prediction


def measured_gains():
    rows = [run("baseline", c, r, 10.0 * c) for c in (1, 8) for r in range(3)]
    rows += [run("draft_model", 1, r, x) for r, x in enumerate([14.0, 15.0, 16.0])]
    rows += [run("draft_model", 8, r, x) for r, x in enumerate([60.0, 64.0, 68.0])]
    return served.speedups(pd.DataFrame(rows)), pd.DataFrame(rows)


def test_compare_gives_the_prediction_error_and_whether_it_lies_inside():
    gains, _ = measured_gains()
    predicted = pd.DataFrame([
        {"method": "draft_model", "concurrency": 1, "quantity": "latency", "predicted": 1.2, "fits": True},
        {"method": "draft_model", "concurrency": 8, "quantity": "throughput", "predicted": 0.78, "fits": True}])
    compared = served.compare(gains, predicted).set_index("concurrency")
    assert compared.loc[1, "error"] == pytest.approx(1.5 / 1.2 - 1)
    assert not compared.loc[1, "inside"]  # measured range 1.4-1.6
    assert compared.loc[8, "error"] == pytest.approx(0.8 / 0.78 - 1)
    assert compared.loc[8, "inside"]  # measured range 0.75-0.85
    lines = served.verdict_lines(served.compare(gains, predicted))
    assert lines[0].startswith("draft_model at concurrency 1: 1.50x output throughput [1.40, 1.60] (range of 3 pairs")
    assert "it paid (the whole interval above 1)" in lines[0] and "too few repetitions to call" in lines[0]
    assert "Checklist: 1.20x latency (outside the measured interval; measured / predicted - 1 = +25%)" in lines[0]
    assert "it lost (the whole interval below 1)" in lines[1] and "0.78x throughput (inside" in lines[1]


STEPS = len(speed_model.STEP_PARAMS)  # the terms after the first 11 (T > 0, a pass's rising) are 0 here


def measurements(speedup_04=(1.3, 1.2, 1.4), speedup_06=(0.7, 0.6, 0.8)) -> checklist.Measurements:
    grid = pd.DataFrame([
        {"category": "structured", "temperature": t, "method": "draft_model", "speedup": speedup_04[0],
         "speedup_ci_low": speedup_04[1], "speedup_ci_high": speedup_04[2], "decode_speedup": 1.5,
         "decode_ci_low": 1.4, "decode_ci_high": 1.6, "acceptance_rate": 0.6} for t in (0.0, 1.0)])
    batch = pd.DataFrame([{"method": "draft_model", "concurrency": n, "speedup": s, "speedup_ci_low": lo,
                           "speedup_ci_high": hi} for n, (s, lo, hi) in [(1, (1.2, 1.1, 1.3)), (16, speedup_06)]])
    long = pd.DataFrame([{"arm": a, "vs": "draft_model k=4", "method": m, "prompt_length": 128, "ttft_s": 0.05,
                          "tpot_ms": tpot, "decode_speedup": d}
                         for a, m, tpot, d in [("baseline", "baseline", 20.0, 1.0), ("d", "draft_model", 13.3, 1.5)]])
    acceptance = pd.DataFrame([{"category": "structured", "temperature": t, "method": "draft_model", "k": 4,
                                "prompt_index": i, "prompt_tokens": 60, "output_tokens": 48, "tau": tau, "accepted": 9,
                                "draft_tokens": 40, "drafted_steps": 10, "verify_steps": 10}
                               for t in (0.0, 1.0) for i, tau in enumerate((2.4, 2.6, 2.8))])
    return checklist.Measurements(grid, long, batch, checklist.Source("cpu", "CPU: test", "t", "d"), acceptance,
                                  speed_model.Costs(np.r_[0.04, 0.002, 0, 0.005, 0.0005, 0, 0, 0.002, 0, 0, 0,
                                                          np.zeros(STEPS - 11)],
                                                    np.zeros((STEPS, STEPS)),
                                                    np.array([0.05, 0.0008, 0, 0.01, 0, 0, 0, 0]), np.zeros((8, 8))), 4)


def test_predictions_name_the_checklists_quantity_per_concurrency():
    talk = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct")
    predicted = served.predictions(measurements(), workload_kind="structured", temperature=0.0, prompt_tokens=128,
                                   output_tokens=48, concurrencies=[1, 8], target_config=talk[0],
                                   draft_config=talk[1], gpu_gb=96).set_index("concurrency")
    assert predicted.loc[1, "quantity"] == "latency" and predicted.loc[8, "quantity"] == "throughput"
    # the talk's pair is not the measured one: roofline costs, flat in the batch, so 8 requests gain about as much
    assert predicted.loc[8, "predicted"] == pytest.approx(predicted.loc[1, "predicted"], rel=0.15)
    assert "roofline" in predicted.loc[8, "verdict"] and predicted["fits"].all()
    assert predicted.loc[1, "low"] < predicted.loc[1, "predicted"] < predicted.loc[1, "high"]
    with pytest.raises(ValueError, match="WORKLOAD_KIND"):
        served.predictions(measurements(), workload_kind="chat", temperature=0.0, prompt_tokens=128,
                           output_tokens=48, concurrencies=[1], target_config=talk[0], draft_config=talk[1])


def test_agreement_says_same_direction_or_what_differs():
    gains, table = measured_gains()  # paid at 1 (1.4-1.6), lost at 8 (0.75-0.85)
    lines = served_findings.agreement(gains, measurements(), "structured", 0.0, table)
    assert lines[0].startswith("draft_model at 1 request: served 1.50x [1.40, 1.60], it paid")
    assert "notebook 04 (structured, T=0, offline engine): 1.30x [1.20, 1.40], it paid" in lines[0]
    assert lines[0].endswith("Same direction.")
    high = next(line for line in lines if line.startswith("draft_model at 8 requests"))
    assert "notebook 06 at 16 (the measured concurrency nearest 8; structured, T=0)" in high
    assert high.endswith("Same direction.")

    paid_in_06 = served_findings.agreement(gains, measurements(speedup_06=(1.2, 1.1, 1.3)), "structured", 0.0, table)
    differs = next(i for i, line in enumerate(paid_in_06) if line.startswith("draft_model at 8 requests"))
    assert paid_in_06[differs].endswith("The direction differs:")
    reasons = " ".join(paid_in_06[differs + 1:])
    assert "06 submitted its n requests at once" in reasons
    assert "the served baseline's throughput rose x8.00 from 1 to 8 concurrent requests" in reasons


def test_agreement_at_concurrency_one_lists_the_differences():
    gains, table = measured_gains()
    lines = served_findings.agreement(gains, measurements(speedup_04=(0.9, 0.8, 0.95)), "structured", 0.0, table)
    assert lines[0].endswith("The direction differs:")
    assert any("end-to-end latency ratio here" in line for line in lines[1:4])
    assert any("requests wrote 48 tokens on average (max_tokens 48)" in line for line in lines)


def test_agreement_without_concurrency_one_or_data():
    rows = [run("baseline", 4, 0, 10.0), run("draft_model", 4, 0, 12.0)]
    gains = served.speedups(pd.DataFrame(rows))
    assert "not 1: no comparison with notebook 04" in served_findings.agreement(gains, measurements(), "structured", 0.0)[0]
    assert served_findings.agreement(gains, None, "structured", 0.0) == ["No results of notebooks 04 and 06 to compare the "
                                                               "direction with."]


def test_06_is_read_at_the_nearest_concurrency_and_the_larger_of_two():
    rows = [run("baseline", c, 0, 10.0 * c) for c in (1, 4)] + [run("draft_model", c, 0, 12.0 * c) for c in (1, 4)]
    lines = served_findings.agreement(served.speedups(pd.DataFrame(rows)), measurements(), "structured", 0.0)
    assert any("notebook 06 at 16 (the measured concurrency nearest 4" in line for line in lines)  # 4: as near 1 as 16


def test_direction():
    assert served.direction(1.01, 1.5) == "paid"
    assert served.direction(0.5, 0.99) == "lost"
    assert served.direction(0.9, 1.1) == "unclear"


def test_checklist_data_prefers_this_machines_results(monkeypatch):
    data = measurements()
    grid = data.grid.assign(arm="draft d k=4", k=4, profile="test")
    long = data.long_context.assign(profile="test")
    batch = pd.concat([data.batch.assign(arm="draft d k=4"),
                       data.batch.assign(arm="draft d k by batch size 1-3:4", method="draft_model")]).assign(profile="test")
    fitted = speed_model.to_frame(data.costs)
    frames = {"04_structured_vs_creative": grid, "05_long_context": long, "06_concurrency": batch,
              "04_acceptance": data.acceptance, "06_speed_model": fitted}
    monkeypatch.setattr(served.results, "load", lambda name: frames[name])
    found, where = served.checklist_data(PROFILE)
    assert "this machine's results" in where and set(found.batch["arm"]) == {"draft d k=4"}

    monkeypatch.setattr(served.results, "load", lambda name: None)
    monkeypatch.setattr(served.checklist, "reference_measurements", lambda profile: None)
    found, where = served.checklist_data(PROFILE)
    assert found is None and "run notebooks 04-06 first" in where


# ------------------------------------------------------------------------------------------- checks before a server


@pytest.mark.parametrize("change, message", [
    (dict(concurrencies=[0]), "concurrency must be a whole number >= 1, got 0"),
    (dict(concurrencies=[]), "CONCURRENCIES must be a non-empty list"),
    (dict(concurrencies=4), "CONCURRENCIES must be a non-empty list"),
    (dict(concurrencies=[1, 1]), "repeat a value"),
    (dict(repetitions=0), "repetitions must be a whole number >= 1"),
    (dict(methods=("draft_model", "ngram")), "lack 'baseline'"),
    (dict(methods=("baseline",)), "at least one speculative method"),
    (dict(methods=("baseline", "eagle")), "methods must be some of"),
    (dict(base_urls={"baseline": "http://h:8000", "draft_model": "h:8001"}), "must be URLs starting with http"),
    (dict(base_urls={"baseline": "http://h:8000", "medusa": "http://h:8001"}), "unknown methods"),
    (dict(base_urls={"baseline": "http://h:8000"}), "at least one speculative method"),
    (dict(base_urls={"baseline": "http://h:8000", "ngram": "http://h:1"}, methods=("baseline", "draft_model")),
     r"no URL for \['draft_model'\]"),
    (dict(workload_kind="chat"), "WORKLOAD_KIND must be one of"),
])
def test_a_bad_plan_is_a_clear_error(change, message):
    with pytest.raises(ValueError, match=message):
        served.prepare(pasted="Write a haiku about tea.", **{**PLAN, **change})


def test_methods_follow_the_deployment_urls():
    urls = {"draft_model": "http://h:8001", "baseline": "http://h:8000"}
    assert served.check_plan(None, [1], 1, urls) == ("baseline", "draft_model")
    assert served.check_plan(None, [1], 1, None) == served.METHODS


def test_prompts_come_from_pasted_text_then_a_file_then_the_kit(tmp_path):
    pasted = served.prepare(pasted="Write a haiku about tea.\n\nName three rivers.\n", **PLAN)
    assert pasted.prompts == ("Write a haiku about tea.", "Name three rivers.") and pasted.source == "pasted text"
    assert pasted.prompt_tokens == (5, 3) and pasted.concurrency == 4 and pasted.num_prompts == 2

    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "Summarise this."}\n')
    from_file = served.prepare(path, **PLAN)
    assert from_file.prompts == ("Summarise this.",) and from_file.source == str(path)
    assert served.prepare(str(path), pasted="Pasted wins.", **PLAN).source == "pasted text"

    kit = served.prepare(None, **{**PLAN, "profile": Profile(**{**PROFILE.__dict__, "max_model_len": 2048})},
                         num_prompts=3)
    assert kit.source == served.KIT_PROMPTS and kit.num_prompts == 3 and len(kit) >= 3
    assert "3 requests per run" in served.describe_workload(kit)
    assert [served.short_source(w) for w in (pasted, from_file, kit)] == [
        "pasted text", "mine.jsonl", "the kit's structured prompts"]


@pytest.mark.parametrize("source, message", [
    (dict(pasted="   \n\n"), "the pasted text holds no prompts"),
    (dict(path="missing_prompts.jsonl"), "does not exist"),
    (dict(pasted="word " * 100), "longer than 56 tokens"),
])
def test_bad_prompts_are_a_clear_error(source, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        served.prepare(**source, **PLAN)


def test_the_prompt_box_is_read_by_its_value():
    box = served.prompt_box()
    assert box.value == "" and not box.continuous_update
    box.value = "Write a haiku.\nName a river."
    assert served.prepare(pasted=box.value, **PLAN).prompts == ("Write a haiku.", "Name a river.")


# ------------------------------------------------------------------------------------------- the measurement loop


def test_counter_columns_difference_and_no_speculation():
    before, after = SpecCounters(10, 40, 20, (8, 6, 4, 2)), SpecCounters(20, 80, 50, (17, 14, 11, 8))
    columns = served.counter_columns(before, after)
    assert columns["drafts"] == 10 and columns["accepted_tokens"] == 30
    assert columns["acceptance_rate"] == pytest.approx(30 / 40)
    assert columns["mean_acceptance_length"] == pytest.approx(4.0)
    assert columns["position_acceptance"] == pytest.approx([0.9, 0.8, 0.7, 0.6])
    assert served.counter_columns(None, after)["drafts"] == 20  # counters appear with the first draft
    none = served.counter_columns(None, None)
    assert math.isnan(none["acceptance_rate"]) and none["position_acceptance"] == []


class FakeServer:
    """Stands in for serving.Server: records starts and stops, serves growing speculation counters."""

    events: list = []
    ports: list = []

    def __init__(self, profile=None, method="baseline", k=None, port=0, **options):
        self.ports.append(port)
        self.method, self.base_url, self.model, self.owned = method, f"http://127.0.0.1:{port}/{method}", "tiny", True

    @classmethod
    def from_url(cls, url, model=None):
        server = cls(method=url.rsplit("/", 1)[-1])
        server.base_url, server.owned = url, False
        cls.events.append(("checked", url))
        return server

    started = False

    def launch(self):
        self.events.append(("launch", self.method))
        return self

    def wait(self):
        self.events.append(("healthy", self.method))
        self.started = True
        return self

    def stop(self):
        if self.started:
            self.events.append(("stop", self.method))
            self.started = False

    def __enter__(self):
        return self if self.started else self.launch().wait()

    def __exit__(self, *exc):
        self.stop()


def fake_bench(fail_on=None):
    calls = {"n": 0}

    def run(server, workload, dataset_path=None, result_dir=None, label="", **options):
        calls["n"] += 1
        run.warmups.append(options["num_warmups"])
        assert isinstance(options["client"], bench.BenchClient)
        if fail_on and label.startswith(fail_on):
            raise bench.BenchError("client failed")
        path = result_dir / f"{label}-c{workload.concurrency}-{calls['n']}.json"
        path.write_text(json.dumps({
            "completed": workload.num_prompts, "duration": 2.0, "max_concurrency": workload.concurrency,
            "num_prompts": workload.num_prompts, "request_rate": "inf", "model_id": "tiny", "failed": 0,
            "total_output_tokens": 8 * workload.num_prompts, "output_throughput": 4.0 * workload.num_prompts,
            "median_tpot_ms": 20.0, "median_itl_ms": 20.0, "median_e2el_ms": 200.0, "median_ttft_ms": 30.0}))
        return path

    run.warmups = []
    return run


def fake_counters():
    state = {}

    def counters(base_url, model_name=None):
        if base_url.endswith("baseline"):
            return None
        state[base_url] = state.get(base_url, 0) + 1
        n = state[base_url]
        return SpecCounters(10 * n, 40 * n, 20 * n, (8 * n, 6 * n, 4 * n, 2 * n))

    return counters


@pytest.fixture
def stand_ins(monkeypatch):
    FakeServer.events, FakeServer.ports = [], []
    monkeypatch.setattr(serving, "Server", FakeServer)
    monkeypatch.setattr(serving, "check_port_free", lambda port, host=None: None)
    monkeypatch.setattr(serving, "spec_counters", fake_counters())
    monkeypatch.setattr(served, "labels", lambda profile, method, base_url=None: {
        "hardware": "test", "profile": "test", "target": None, "draft": "", "method": method, "k": 4, "arm": method})
    return monkeypatch


def test_measure_interleaves_the_servers_runs_and_writes_tidy_rows(stand_ins, tmp_path):
    stand_ins.setattr(bench, "bench_workload", runs := fake_bench())
    workload = served.prepare(pasted="a b\nc d", **PLAN)
    table = served.measure(PROFILE, workload, ("baseline", "ngram"), [1, 4], 2, result_dir=tmp_path, progress=False)
    assert runs.warmups == [1, 1] + [0] * 6  # warm-up requests in each server's first run only
    assert FakeServer.events == [("launch", "baseline"), ("launch", "ngram"), ("healthy", "baseline"),  # together
                                 ("healthy", "ngram"), ("stop", "ngram"), ("stop", "baseline")]
    assert len(table) == 2 * 2 * 2
    assert list(table[["method", "repetition", "concurrency"]].itertuples(index=False, name=None)) == [
        ("baseline", 0, 1), ("ngram", 0, 1), ("baseline", 0, 4), ("ngram", 0, 4),  # the methods take turns,
        ("ngram", 1, 1), ("baseline", 1, 1), ("ngram", 1, 4), ("baseline", 1, 4)]  # their order rotating
    assert FakeServer.ports == [serving.DEFAULT_PORT, serving.DEFAULT_PORT + 1]  # one port each
    assert (table["repetitions"] == 2).all() and (table["source"] == "pasted text").all()
    assert table.set_index("method").loc["baseline", "num_prompts"].tolist() == [2, 4, 2, 4]  # at least c requests
    ngram = table[table["method"] == "ngram"]
    assert (ngram["drafts"] == 10).all() and (ngram["acceptance_rate"] == 0.5).all()  # differenced around each run
    assert table[table["method"] == "baseline"]["acceptance_rate"].isna().all()
    assert (table["target"] == "tiny").all() and "bench_acceptance_rate" in table
    assert (table["tokens_per_request"] == 8).all()
    assert served.speedups(table)["speedup"].tolist() == pytest.approx([1.0, 1.0])


def test_measure_with_deployment_urls_starts_nothing(stand_ins, tmp_path):
    stand_ins.setattr(bench, "bench_workload", fake_bench())
    urls = {"baseline": "http://gpu:8000/baseline", "draft_model": "http://gpu:8001/draft_model"}
    workload = served.prepare(pasted="a b", **PLAN)
    table = served.measure(PROFILE, workload, None, [1], 1, base_urls=urls, result_dir=tmp_path, progress=False)
    assert FakeServer.events[:2] == [("checked", urls["baseline"]), ("checked", urls["draft_model"])]
    assert list(table["method"]) == ["baseline", "draft_model"]


def test_a_failed_run_stops_the_servers_and_keeps_what_was_measured(stand_ins, tmp_path):
    stand_ins.setattr(bench, "bench_workload", fake_bench(fail_on="ngram"))
    workload = served.prepare(pasted="a b", **PLAN)
    with pytest.raises(bench.BenchError):
        served.measure(PROFILE, workload, ("baseline", "ngram"), [1], 1, result_dir=tmp_path, progress=False)
    assert FakeServer.events[-2:] == [("stop", "ngram"), ("stop", "baseline")]  # both, after the error
    assert list(served.measure.partial["method"]) == ["baseline"]


# ------------------------------------------------------------------------------------------- the ITL pitfall


def test_itl_pitfall_sentences():
    rows = [run("baseline", 1, r, 10.0, tpot=50.0, itl=50.0) for r in range(2)]
    rows += [run("draft_model", 1, r, 14.0, tpot=36.0, itl=90.0, drafts=10, draft_tokens=40, accepted=15)
             for r in range(2)]
    itl = served_findings.itl_table(pd.DataFrame(rows)).set_index("method")
    assert itl.loc["draft_model", "itl_over_tpot"] == pytest.approx(2.5)
    assert itl.loc["draft_model", "mean_acceptance_length"] == pytest.approx(2.5)
    lines = served_findings.itl_sentences(itl.reset_index())
    assert lines[0].startswith("baseline at concurrency 1: median ITL 50.0 ms, TPOT 50.0 ms (ratio 1.00")
    assert "Judged by ITL, 1.80x the baseline's gap: it looks slower" in lines[1]
    assert "per token (TPOT) it is 1.39x faster than the baseline" in lines[1]


def test_counter_check_compares_with_the_clients_own_counts():
    table = pd.DataFrame([{"method": "ngram", "drafts": 12, "bench_drafts": 10},
                          {"method": "ngram", "drafts": 15, "bench_drafts": 12},
                          {"method": "baseline", "drafts": float("nan"), "bench_drafts": float("nan")}])
    assert "2 to 3 per run over 2 runs" in served_findings.counter_check(table)[0]


def test_the_engine_layout_lines_come_from_the_layout_measurement():
    common = dict(arm="draft 2l k=4", prompts=8, max_tokens=48, repetitions=2, hardware="CPU: test (2 cores)",
                  date="2026-12-03", acceptance_rate=0.305, tokens_per_verify_step=2.27, k=4)
    layouts = pd.DataFrame([
        {"layout": "multiprocess", "speedup": 0.93, "speedup_ci_low": 0.71, "speedup_ci_high": 1.21, "c_eff": 0.40,
         "baseline_tpot_ms": 108, **common},
        {"layout": "in-process", "speedup": 1.19, "speedup_ci_low": 0.91, "speedup_ci_high": 1.55, "c_eff": 0.24,
         "baseline_tpot_ms": 93, **common},
        {"layout": "one-core", "speedup": 1.05, "speedup_ci_low": 0.78, "speedup_ci_high": 1.41, "c_eff": 0.32,
         "baseline_tpot_ms": 116, **common}]).set_index("layout")
    binding, measured, even = served_findings.layout_lines(layouts)
    assert "ompmultiprocessing.py" in binding
    assert "in-process 1.19x [0.91, 1.55], one-core 1.05x [0.78, 1.41], multiprocess 0.93x [0.71, 1.21]" in measured
    assert "per draft token) 0.24 -> 0.32 -> 0.40" in measured and "93 -> 116 -> 108 ms: the intervals overlap" in measured
    assert "acceptance 30% and 2.27 tokens per verify step in each" in measured and "CPU: test (2 cores), 2026-12-03" in measured
    assert "c_eff = (2.27 - 1) / 4 = 0.32" in even
    assert even.endswith("in-process below it; one-core above it; multiprocess above it")  # 0.32 vs 0.3175


def test_a_prediction_from_the_users_own_acceptance():
    rows = [run("baseline", 1, r, 10.0) for r in range(2)] + [run("draft_model", 1, r, 12.0) for r in range(2)]
    table = pd.DataFrame(rows).assign(drafts=[0, 0, 20, 20], accepted_tokens=[0, 0, 10, 30])
    assert served.measured_tau(table) == {"draft_model": [1.5, 2.5]}
    talk = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct")
    kwargs = dict(workload_kind="structured", temperature=0.0, prompt_tokens=128, output_tokens=48, concurrencies=[1],
                  target_config=talk[0], draft_config=talk[1], gpu_gb=96)
    yours = served.predictions(measurements(), measured=table, **kwargs)
    category = served.predictions(measurements(), **kwargs)
    assert any("your prompts, measured: 2.00 tokens per verify step" in r for r in yours.iloc[0]["reasons"])
    assert yours.iloc[0]["predicted"] < category.iloc[0]["predicted"]  # 2.0 per step against the category's 2.6
    compared = served.compare(served.speedups(table), category, yours)
    assert compared.iloc[0]["predicted_from_yours"] == pytest.approx(yours.iloc[0]["predicted"])
