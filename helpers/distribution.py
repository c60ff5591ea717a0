"""Is a speculative arm's sampled output distributed like the baseline's? A chi-square test of homogeneity on
the token at one position, the total variation distance between the two samples, and the smallest distance the
test detects at a given sample size (its power), so a pass can be read for what it is worth."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency

ALPHA = 0.001  # a test fails below this p-value


def token_counts(outputs: Sequence, position: int) -> pd.Series:
    """How often each token id appears at ``position`` of the generated text (requests shorter are left out)."""
    ids = [o.outputs[0].token_ids[position] for o in outputs if len(o.outputs[0].token_ids) > position]
    return pd.Series(Counter(ids), dtype=float).sort_values(ascending=False)


def pooled_table(samples: dict[str, pd.Series], min_count: int = 10) -> pd.DataFrame:
    """Tokens as rows, samples as columns; tokens seen fewer than ``min_count`` times in all samples together
    are pooled into one row "other", so the chi-square approximation holds."""
    table = pd.DataFrame(samples).fillna(0)
    rare = table.sum(axis=1) < min_count
    if rare.any():
        table = pd.concat([table[~rare], table[rare].sum().to_frame("other").T])
    return table[table.sum(axis=1) > 0]


def homogeneity(a: pd.Series, b: pd.Series, min_count: int = 10) -> dict[str, float]:
    """Chi-square test that ``a`` and ``b`` (token counts) come from one distribution, and their total variation."""
    table = pooled_table({"a": a, "b": b}, min_count)
    if len(table) < 2:
        return {"chi2": 0.0, "p_value": 1.0, "dof": 0, "tv": 0.0, "n_a": a.sum(), "n_b": b.sum()}
    chi2, p_value, dof, _ = chi2_contingency(table.values.T)
    shares = table / table.sum()
    return {"chi2": float(chi2), "p_value": float(p_value), "dof": int(dof),
            "tv": float(0.5 * (shares["a"] - shares["b"]).abs().sum()), "n_a": int(a.sum()), "n_b": int(b.sum())}


def _rejects(p: np.ndarray, q: np.ndarray, n: int, rng: np.random.Generator, min_count: int) -> bool:
    a, b = rng.multinomial(n, p), rng.multinomial(n, q)
    return homogeneity(pd.Series(a), pd.Series(b), min_count)["p_value"] < ALPHA


def detectable_tv(reference: pd.Series, n: int, power: float = 0.8, draws: int = 200, seed: int = 0,
                  min_count: int = 10) -> float:
    """Smallest total variation distance the test rejects with probability ``power`` at ``n`` samples per arm.

    The alternative mixes a uniform distribution over the reference's tokens into the reference distribution
    (q = (1 - e) p + e u) and bisects on e; the result is TV(p, q). Simulated with ``draws`` pairs per step.
    """
    p = reference.to_numpy(dtype=float)
    p = p / p.sum()
    u = np.full_like(p, 1 / len(p))
    rng = np.random.default_rng(seed)

    def rate(e: float) -> float:
        q = (1 - e) * p + e * u
        return np.mean([_rejects(p, q, n, rng, min_count) for _ in range(draws)])

    low, high = 0.0, 1.0
    if rate(high) < power:
        return float("nan")  # even the uniform alternative is not detected reliably
    for _ in range(8):
        mid = (low + high) / 2
        low, high = (low, mid) if rate(mid) >= power else (mid, high)
    return float(high * 0.5 * np.abs(p - u).sum())
