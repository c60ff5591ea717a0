import numpy as np
import pandas as pd
import pytest

from helpers import data_curve


def rows(noise: float = 0.0, sizes=(100, 200, 400, 800)) -> pd.DataFrame:
    """Three prompts; each head's training noise moves all of its prompts together."""
    rng = np.random.default_rng(0)
    a = {"json": 2.0, "sql": 2.5, "python": 1.2}
    shift = {n: noise * rng.normal() for n in sizes}
    return pd.DataFrame([{"prompt": p, "sequences": n, "tau": a[p] + 0.1 * np.log(n) + shift[n]}
                         for p in a for n in sizes])


def test_an_exact_line_is_recovered_and_inverted():
    curve = data_curve.fit(rows())
    assert curve.slope == pytest.approx(0.1)
    assert curve.per_prompt(1600).to_dict() == pytest.approx({p: v + 0.1 * np.log(1600) for p, v in
                                                              {"json": 2.0, "python": 1.2, "sql": 2.5}.items()})
    # the mean over prompts reaches 2.5 where 1.9 + 0.1 ln N = 2.5
    assert curve.sequences_for(2.5) == pytest.approx(np.exp(6.0))
    assert curve.per_prompt(curve.sequences_for(2.5)).mean() == pytest.approx(2.5)
    assert curve.largest == 800


def test_the_slope_interval_holds_the_true_slope_and_a_flat_slope_never_gets_there():
    curve = data_curve.fit(rows(noise=0.05))
    low, high = curve.slope_interval()
    assert low < 0.1 < high and curve.slope_se > 0
    assert curve.dof == 2  # four heads: the heads, not the 12 points, are the sample for the slope
    assert curve.sequences_for(3.0, slope=high) < curve.sequences_for(3.0) < curve.sequences_for(3.0, slope=low)
    assert curve.sequences_for(3.0, slope=0.0) == float("inf")
    # a new head's mean: the true line inside the interval, which widens away from the heads fitted
    near, far = curve.interval(300), curve.interval(30_000)
    assert near[1] < 1.9 + 0.1 * np.log(300) < near[2]
    assert far[2] - far[1] > near[2] - near[1] > 0


def test_a_missing_point_moves_neither_the_slope_nor_the_mean_over_prompts():
    curve = data_curve.fit(rows().drop(index=0))
    assert curve.slope == pytest.approx(0.1)
    assert curve.sequences_for(2.5) == pytest.approx(np.exp(6.0))


def test_fewer_than_three_sizes_are_refused():
    with pytest.raises(ValueError, match="three numbers"):
        data_curve.fit(rows(sizes=(100, 200)))
