import pytest

from helpers.theory import (
    acceptance_rate_from_alpha,
    alpha_from_acceptance_rate,
    alpha_from_mean_acceptance_length,
    break_even_c,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
)


@pytest.mark.parametrize("alpha, k, expected", [
    (0.0, 4, 1.0),            # nothing accepted: the target's own token only
    (1.0, 4, 5.0),            # everything accepted: k + 1
    (0.5, 1, 1.5),            # 1 + 0.5
    (0.5, 4, 1.9375),         # 1 + .5 + .25 + .125 + .0625
    (0.8, 3, 2.952),          # 1 + .8 + .64 + .512
])
def test_expected_tokens_per_step_by_hand(alpha, k, expected):
    assert expected_tokens_per_step(alpha, k) == pytest.approx(expected)


def test_expected_speedup_by_hand():
    # Leviathan et al. Fig./Table: alpha 0.8, k 3, c 0.05 -> 2.952 / 1.15
    assert expected_speedup(0.8, 3, 0.05) == pytest.approx(2.952 / 1.15)
    assert expected_speedup(0.0, 4, 0.25) == pytest.approx(0.5)  # all drafts wasted: 1 / 2
    assert expected_speedup(1.0, 4, 0.25) == pytest.approx(2.5)


def test_optimal_k():
    assert optimal_k(0.0, 0.1) == 1            # nothing accepted: the smallest draft hurts least
    assert optimal_k(0.8, 0.05) == max(range(1, 17), key=lambda k: expected_speedup(0.8, k, 0.05))
    assert optimal_k(0.99, 0.001) == 16
    assert optimal_k(0.6, 0.5) in (1, 2)


def test_acceptance_rate_round_trip():
    for alpha in (0.0, 0.3, 0.7, 0.95):
        rate = acceptance_rate_from_alpha(alpha, 4)
        assert alpha_from_acceptance_rate(rate, 4) == pytest.approx(alpha, abs=1e-9)
    assert acceptance_rate_from_alpha(0.5, 4) == pytest.approx(0.9375 / 4)
    assert alpha_from_mean_acceptance_length(1.9375, 4) == pytest.approx(0.5, abs=1e-9)


def test_break_even():
    c = break_even_c(0.6, 4)
    assert expected_speedup(0.6, 4, c) == pytest.approx(1.0)


@pytest.mark.parametrize("call, message", [
    (lambda: expected_tokens_per_step(1.2, 4), "alpha"),
    (lambda: expected_tokens_per_step(-0.1, 4), "alpha"),
    (lambda: expected_tokens_per_step(float("nan"), 4), "alpha"),
    (lambda: expected_tokens_per_step(0.5, 0), "k must"),
    (lambda: expected_tokens_per_step(0.5, 2.5), "k must"),
    (lambda: expected_speedup(0.5, 4, 0.0), "c "),
    (lambda: expected_speedup(0.5, 4, -1.0), "c "),
    (lambda: alpha_from_acceptance_rate(1.5, 4), "acceptance rate"),
    (lambda: alpha_from_mean_acceptance_length(6.0, 4), "mean acceptance length"),
])
def test_invalid_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_effective_cost_ratio_recovers_a_known_value():
    from helpers.theory import effective_cost_ratio

    target_step, k, c_eff, steps = 0.050, 4, 0.3, 20
    decode = steps * target_step * (1 + k * c_eff)  # synthetic timings of a speculative request
    assert effective_cost_ratio(decode, steps, target_step, k) == pytest.approx(c_eff)
    with pytest.raises(ValueError):
        effective_cost_ratio(decode, 0, target_step, k)


def test_conditional_acceptance_and_speedup_from_positions():
    from helpers.theory import conditional_acceptance, speedup_from_positions

    # The README's measured 0.47, 0.26, 0.15, 0.10 are not geometric: conditional rates rise along the draft.
    assert conditional_acceptance([0.47, 0.26, 0.15, 0.10]) == pytest.approx([0.47, 0.26 / 0.47, 0.15 / 0.26, 0.10 / 0.15])
    assert conditional_acceptance([0.5, 0.25, 0.125]) == pytest.approx([0.5, 0.5, 0.5])  # geometric: all alpha
    geometric = [0.6 ** i for i in range(1, 9)]
    for k in (1, 4, 8):  # on a geometric profile the per-position formula is the constant-alpha formula
        assert speedup_from_positions(geometric, k, 0.1) == pytest.approx(expected_speedup(0.6, k, 0.1))
    assert speedup_from_positions([0.47, 0.26, 0.15, 0.10], 2, 0.25) == pytest.approx(1.73 / 1.5)
    with pytest.raises(ValueError, match="4 positions"):
        speedup_from_positions([0.47, 0.26, 0.15, 0.10], 5, 0.25)


def test_positions_against_constant_alpha_fits_alpha_to_the_same_mean():
    from helpers.theory import positions_against_constant_alpha

    rows = positions_against_constant_alpha([0.47, 0.26, 0.15, 0.10], 0.25)
    alpha = rows[0]["alpha"]
    assert sum(alpha ** k for k in range(1, 5)) == pytest.approx(0.98)  # same expected accepted tokens at k = 4
    assert rows[-1]["speedup_per_position"] == pytest.approx(rows[-1]["speedup_constant_alpha"])
    # conditional rates rise along the draft: the fitted alpha overstates position 1 and understates position 4
    assert rows[0]["measured"] < rows[0]["constant_alpha"] and rows[-1]["measured"] > rows[-1]["constant_alpha"]
    assert [r["k"] for r in rows] == [1, 2, 3, 4]


def test_geometric_test_accepts_the_issue_counts_and_rejects_a_cliff():
    from helpers.theory import geometric_test

    # 42 drafts at k = 8, accepted at positions 1-8: 28, 17, 12, 9, 6, 5, 5, 3 (the reference's structured T = 0)
    fit = geometric_test([28, 17, 12, 9, 6, 5, 5, 3], 42)
    assert fit["alpha"] == pytest.approx(85 / 124) and fit["p_value"] > 0.3
    cliff = geometric_test([400, 390, 20, 19], 420)  # accepts 2 positions almost always, then rarely
    assert cliff["p_value"] < 1e-6
    with pytest.raises(ValueError):
        geometric_test([5, 6], 10)
