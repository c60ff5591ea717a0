"""How a draft's acceptance grows with its training data: tokens per verify step against ln(training sequences).

``fit`` takes one row per (head, prompt): the head's training sequences and the prompt's tokens per verify step
(tau) at T = 0, and fits tau = a_prompt + b ln N by least squares, with an intercept per prompt (prompts differ in how
predictable they are) and one slope (what more data buys every prompt). The slope's standard error comes from the
residuals; the fitted line passes through the mean point, so ``sequences_for`` pivots on it. Beyond the largest N
fitted, every number it gives is an extrapolation of that straight line in ln N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class DataCurve:
    prompts: list  # prompt ids, in the order of ``intercepts``
    intercepts: np.ndarray  # a_prompt
    slope: float  # b: tokens per verify step per unit of ln N
    slope_se: float
    dof: int
    mean_log_n: float  # the fitted points' mean ln N and mean tau: the line passes through them
    mean_tau: float
    largest: int  # the largest N fitted; above it, predictions extrapolate

    def per_prompt(self, sequences: float) -> pd.Series:
        """Each prompt's predicted tau at ``sequences`` training sequences."""
        return pd.Series(self.intercepts + self.slope * np.log(sequences), index=self.prompts)

    def slope_interval(self, level: float = 0.95) -> tuple[float, float]:
        from scipy.stats import t

        half = t.ppf(0.5 + level / 2, self.dof) * self.slope_se
        return self.slope - half, self.slope + half

    def sequences_for(self, tau: float, slope: float | None = None) -> float:
        """Training sequences at which the mean tau over the prompts reaches ``tau`` (inf if the slope is not
        positive); ``slope`` replaces the fitted one (e.g. an end of its interval), pivoting on the mean point."""
        b = self.slope if slope is None else slope
        return float("inf") if b <= 0 else float(np.exp(self.mean_log_n + (tau - self.mean_tau) / b))


def fit(rows: pd.DataFrame) -> DataCurve:
    """``rows``: columns ``prompt``, ``sequences``, ``tau`` (one row per head and prompt; at least two sizes)."""
    rows = rows.dropna(subset=["tau"])
    prompts = sorted(rows["prompt"].unique())
    if rows["sequences"].nunique() < 2:
        raise ValueError("a data curve needs heads trained on at least two numbers of sequences")
    log_n = np.log(rows["sequences"].to_numpy(float))
    x = np.column_stack([(rows["prompt"] == p).to_numpy(float) for p in prompts] + [log_n])
    y = rows["tau"].to_numpy(float)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    dof = len(y) - x.shape[1]
    if dof < 1:
        raise ValueError(f"{len(y)} points for {x.shape[1]} parameters: no residual to estimate the slope's error")
    residual = y - x @ coef
    cov = residual @ residual / dof * np.linalg.inv(x.T @ x)
    return DataCurve(prompts=prompts, intercepts=coef[:-1], slope=float(coef[-1]), slope_se=float(np.sqrt(cov[-1, -1])),
                     dof=dof, mean_log_n=float(log_n.mean()), mean_tau=float(y.mean()),
                     largest=int(rows["sequences"].max()))
