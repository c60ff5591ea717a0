"""Speedup of speculative decoding in theory (Leviathan, Kalman & Matias 2023, "Fast Inference
from Transformers via Speculative Decoding", ICML; arXiv:2211.17192).

alpha: probability that one draft token is accepted (assumed independent per position).
k: draft tokens proposed per step (vLLM's ``num_speculative_tokens``).
c: cost ratio, the time of one draft step over the time of one target step.
"""

from __future__ import annotations

import math

import numpy as np


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0 or math.isnan(alpha):
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")


def _check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")


def _check_c(c: float) -> None:
    if not c > 0 or math.isinf(c):
        raise ValueError(f"c (draft step time / target step time) must be > 0, got {c}")


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """E[tokens per target step] = (1 - alpha^(k+1)) / (1 - alpha); k + 1 at alpha = 1."""
    _check_alpha(alpha)
    _check_k(k)
    if alpha == 1.0:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """Walltime improvement factor: tokens per step over the cost of a step, (k c + 1) target steps."""
    _check_c(c)
    return expected_tokens_per_step(alpha, k) / (k * c + 1)


def optimal_k(alpha: float, c: float, k_max: int = 16) -> int:
    """The k in 1..k_max with the largest expected speedup (the smallest such k on ties)."""
    _check_k(k_max)
    return max(range(1, k_max + 1), key=lambda k: (expected_speedup(alpha, k, c), -k))


def acceptance_rate_from_alpha(alpha: float, k: int) -> float:
    """vLLM's draft acceptance rate (accepted / proposed) implied by a per-token alpha.

    A step accepts a prefix of the draft: E[accepted] = alpha (1 - alpha^k) / (1 - alpha),
    out of k proposed.
    """
    return (expected_tokens_per_step(alpha, k) - 1) / k


def alpha_from_acceptance_rate(rate: float, k: int, tol: float = 1e-12) -> float:
    """Invert :func:`acceptance_rate_from_alpha` by bisection (it is increasing in alpha)."""
    _check_k(k)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"acceptance rate must be in [0, 1], got {rate}")
    low, high = 0.0, 1.0
    while high - low > tol:
        mid = (low + high) / 2
        if acceptance_rate_from_alpha(mid, k) < rate:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def alpha_from_mean_acceptance_length(length: float, k: int) -> float:
    """Per-token alpha from vLLM's mean acceptance length (1 + accepted per step)."""
    _check_k(k)
    if not 1.0 <= length <= k + 1:
        raise ValueError(f"mean acceptance length must be in [1, {k + 1}], got {length}")
    return alpha_from_acceptance_rate((length - 1) / k, k)


def break_even_c(alpha: float, k: int) -> float:
    """The cost ratio at which speculation neither helps nor hurts (speedup = 1)."""
    return (expected_tokens_per_step(alpha, k) - 1) / k


def effective_cost_ratio(decode_s: float, verify_steps: float, target_step_s: float, k: int) -> float:
    """c_eff measured inside the speculative engine: one verify step (k draft passes + the target scoring k + 1
    tokens + the engine's per-step work) takes ``target_step_s * (1 + k * c_eff)``.

    ``decode_s`` and ``verify_steps`` are the speculative request's decode time and its number of verify steps
    (vLLM's draft count); ``target_step_s`` is the baseline's TPOT. Unlike c measured from the draft served alone,
    c_eff includes what verification of k + 1 tokens costs beyond one decode step, and shares the per-step
    overhead the way the speculative engine does.
    """
    _check_k(k)
    if verify_steps <= 0 or target_step_s <= 0:
        raise ValueError("need at least one verify step and a positive target step time")
    return (decode_s / verify_steps / target_step_s - 1) / k


def conditional_acceptance(per_position) -> list[float]:
    """P(position i accepted | positions before it accepted) from vLLM's per-position acceptance P(i accepted).

    Under the constant-alpha assumption every entry equals alpha; :func:`geometric_test` says whether a measurement
    departs from that more than its sample size allows.
    """
    rates, previous = [], 1.0
    for p in per_position:
        rates.append(float(p) / previous if previous > 0 else float("nan"))
        previous = float(p)
    return rates


def speedup_from_positions(per_position, k: int, c: float) -> float:
    """Expected speedup at draft length k from measured per-position acceptance (no constant-alpha assumption):
    E[tokens per step] = 1 + sum of P(position i accepted) for i <= k, over (k c + 1). Positions measured with
    a longer draft serve for any shorter k (a position's acceptance does not depend on what is drafted after it)."""
    _check_k(k)
    _check_c(c)
    if k > len(per_position):
        raise ValueError(f"per-position acceptance measured for {len(per_position)} positions, asked for k = {k}")
    return (1 + float(sum(per_position[:k]))) / (k * c + 1)


def positions_against_constant_alpha(per_position, c: float) -> list[dict]:
    """Per k up to the measured draft length: measured and constant-alpha P(position accepted), the conditional
    rate, and the predicted speedup both ways. alpha is fitted to the same measurement (its mean acceptance)."""
    n = len(per_position)
    alpha = alpha_from_acceptance_rate(float(sum(per_position)) / n, n)
    conditional = conditional_acceptance(per_position)
    return [{"k": k, "measured": float(per_position[k - 1]), "conditional": conditional[k - 1],
             "constant_alpha": alpha ** k, "alpha": alpha,
             "speedup_per_position": speedup_from_positions(per_position, k, c),
             "speedup_constant_alpha": expected_speedup(alpha, k, c)} for k in range(1, n + 1)]


def geometric_test(accepted_per_position, drafts: int) -> dict[str, float]:
    """Likelihood-ratio test of constant alpha against a free acceptance rate per position.

    ``accepted_per_position[i]``: draft steps that accepted position i + 1; ``drafts``: draft steps. A step reaches
    position i only if it accepted every position before it, so position i is a binomial trial on the steps that
    reached it. Counts must be of distinct drafts: at temperature 0 repeated runs repeat the same drafts and add no
    information (pass one repetition's counts). Returns the pooled alpha, the statistic and its p-value
    (chi-square with positions - 1 degrees of freedom); a small p says the rates differ by position.
    """
    from scipy.stats import chi2

    accepted = np.asarray(accepted_per_position, float)
    reached = np.concatenate([[drafts], accepted[:-1]])
    if drafts <= 0 or (accepted > reached).any():
        raise ValueError("each position's accepted count must be at most the steps that reached it")
    keep = reached > 0
    accepted, reached = accepted[keep], reached[keep]

    def loglik(p):
        p = np.clip(p, 1e-12, 1 - 1e-12)
        return float((accepted * np.log(p) + (reached - accepted) * np.log(1 - p)).sum())

    alpha = accepted.sum() / reached.sum()
    statistic = 2 * (loglik(accepted / reached) - loglik(np.full_like(accepted, alpha)))
    dof = max(len(accepted) - 1, 1)
    return {"alpha": float(alpha), "statistic": float(statistic), "p_value": float(chi2.sf(statistic, dof)),
            "positions": int(len(accepted))}
