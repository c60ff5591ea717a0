import numpy as np
import pandas as pd

from helpers.distribution import ALPHA, detectable_tv, homogeneity, pooled_table

P = np.array([0.45, 0.25, 0.15, 0.1, 0.05])


def sample(p, n, rng):
    return pd.Series(rng.multinomial(n, p), dtype=float)


def test_same_distribution_passes_at_about_the_stated_rate():
    rng = np.random.default_rng(1)
    fails = sum(homogeneity(sample(P, 300, rng), sample(P, 300, rng))["p_value"] < 0.05 for _ in range(400))
    assert fails / 400 < 0.09  # a 5% test: about 5% false alarms


def test_a_biased_sampler_fails_and_its_distance_is_reported():
    rng = np.random.default_rng(2)
    biased = np.array([0.25, 0.25, 0.15, 0.1, 0.25])  # 0.2 of mass moved from the first token to the last
    result = homogeneity(sample(P, 400, rng), sample(biased, 400, rng))
    assert result["p_value"] < ALPHA and abs(result["tv"] - 0.2) < 0.07


def test_detectable_distance_shrinks_with_samples_and_is_detected():
    reference = pd.Series(P * 1000)
    small, large = detectable_tv(reference, 150), detectable_tv(reference, 1000)
    assert 0 < large < small < 0.5
    # at the stated distance the test rejects about 80% of the time
    u = np.full(5, 0.2)
    e = small / (0.5 * np.abs(P - u).sum())
    q = (1 - e) * P + e * u
    rng = np.random.default_rng(3)
    rate = np.mean([homogeneity(sample(P, 150, rng), sample(q, 150, rng))["p_value"] < ALPHA for _ in range(300)])
    assert 0.65 < rate < 0.95


def test_rare_tokens_are_pooled():
    table = pooled_table({"a": pd.Series({1: 50, 2: 3, 3: 2}), "b": pd.Series({1: 45, 2: 4, 4: 1})})
    assert list(table.index) == [1, "other"] and table.loc["other"].tolist() == [5, 5]
