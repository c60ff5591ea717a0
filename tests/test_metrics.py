import math

from vllm.v1.metrics.reader import Counter, Gauge, Vector

from helpers.metrics import ACCEPTED, DRAFT_TOKENS, DRAFTS, PER_POSITION, SpecCounters, counters_from


def metrics(drafts, tokens, accepted, per_pos):
    return [
        Counter(DRAFTS, {}, drafts), Counter(DRAFT_TOKENS, {}, tokens), Counter(ACCEPTED, {}, accepted),
        Vector(PER_POSITION, {}, per_pos), Gauge("vllm:num_requests_running", {}, 3.0),
    ]


def test_counters_from_reads_the_speculation_metrics():
    c = counters_from(metrics(10, 40, 25, [9, 8, 5, 3]))
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_position) == (10, 40, 25, (9, 8, 5, 3))
    assert c.mean_acceptance_length == 3.5
    assert c.acceptance_rate == 25 / 40
    assert c.position_acceptance == [0.9, 0.8, 0.5, 0.3]


def test_counters_sum_over_engines_labels():
    c = counters_from(metrics(1, 4, 2, [1, 1]) + metrics(2, 8, 3, [2, 1, 0, 0]))
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_position) == (3, 12, 5, (3, 2, 0, 0))


def test_difference_is_the_runs_own_counts():
    before = SpecCounters(10, 40, 25, (9, 8, 5, 3))
    after = SpecCounters(15, 60, 30, (13, 10, 5, 3))
    run = after - before
    assert run == SpecCounters(5, 20, 5, (4, 2, 0, 0))
    assert run.mean_acceptance_length == 2.0


def test_no_drafts_gives_nan_not_a_crash():
    c = counters_from([])
    assert c == SpecCounters(0, 0, 0, ())
    assert math.isnan(c.mean_acceptance_length) and math.isnan(c.acceptance_rate)
