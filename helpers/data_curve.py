"""How a draft's acceptance grows with its training data: tokens per verify step against ln(training sequences).

``fit`` takes one row per (head, prompt): the head's training sequences N and the prompt's tokens per verify step
(tau) at T = 0, and fits tau = a_prompt + b ln N: an intercept per prompt (prompts differ in how predictable they
are) and one slope (what more data buys every prompt). Training noise (which answers, which seed) moves every prompt
of a head together, so the heads, not the prompts, are the sample for the slope: it is fitted to the heads' mean tau
against ln N, with H - 2 degrees of freedom for H heads. Beyond the largest N fitted, every number it gives is an
extrapolation of that straight line in ln N.
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
    mean_log_n: float  # the heads' mean ln N, and the line's mean tau over the prompts there
    mean_tau: float
    largest: int  # the largest N fitted; above it, predictions extrapolate
    head_sd: float  # how far a head's mean tau falls from the line (training noise), from the residuals
    log_n_ss: float  # sum of squares of the heads' ln N about their mean

    def per_prompt(self, sequences: float) -> pd.Series:
        """Each prompt's predicted tau at ``sequences`` training sequences."""
        return pd.Series(self.intercepts + self.slope * np.log(sequences), index=self.prompts)

    def interval(self, sequences: float, level: float = 0.95) -> tuple[float, float, float]:
        """The mean tau over the prompts that a new head trained on ``sequences`` would reach: the line's value and
        a prediction interval (the line's uncertainty and one head's training noise)."""
        from scipy.stats import t

        mean = float(self.per_prompt(sequences).mean())
        distance = np.log(sequences) - self.mean_log_n
        heads = self.dof + 2
        half = t.ppf(0.5 + level / 2, self.dof) * self.head_sd * np.sqrt(1 + 1 / heads + distance**2 / self.log_n_ss)
        return mean, mean - half, mean + half

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
    """``rows``: columns ``prompt``, ``sequences``, ``tau`` (one row per head and prompt; at least three sizes).

    Least squares with an intercept per prompt gives the slope (right also when a prompt lacks a point); its error
    comes from each head's mean residual, the part of a head's result that its prompts share."""
    rows = rows.dropna(subset=["tau"])
    sizes = np.sort(rows["sequences"].unique()).astype(float)
    if len(sizes) < 3:
        raise ValueError(f"a data curve needs heads trained on at least three numbers of sequences (the slope's error "
                         f"has one degree of freedom fewer than two), got {len(sizes)}")
    prompts = sorted(rows["prompt"].unique())
    log_n = np.log(rows["sequences"].to_numpy(float))
    x = np.column_stack([(rows["prompt"] == p).to_numpy(float) for p in prompts] + [log_n])
    coef, *_ = np.linalg.lstsq(x, rows["tau"].to_numpy(float), rcond=None)
    head_residual = pd.Series(rows["tau"].to_numpy(float) - x @ coef).groupby(rows["sequences"].to_numpy()).mean()
    centred = np.log(sizes) - np.log(sizes).mean()
    dof = len(sizes) - 2
    head_sd = float(np.sqrt((head_residual**2).sum() / dof))
    slope_se = head_sd / float(np.sqrt(centred @ centred))
    intercepts, slope = coef[:-1], float(coef[-1])
    return DataCurve(prompts=prompts, intercepts=intercepts, slope=slope, slope_se=slope_se, dof=dof,
                     mean_log_n=float(np.log(sizes).mean()),
                     mean_tau=float(intercepts.mean() + slope * np.log(sizes).mean()), largest=int(sizes.max()),
                     head_sd=head_sd, log_n_ss=float(centred @ centred))
