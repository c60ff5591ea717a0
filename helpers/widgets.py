"""Widget factories for the notebooks. Sliders only select or compute from numbers already
measured (instant); anything that runs an engine sits behind a button."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import pandas as pd
from matplotlib import pyplot as plt

from helpers import checklist, theory


class SpeedupExplorer:
    """Sliders for alpha, k and c; the theoretical speedup curve, break-even line and measured points (dicts with
    alpha, speedup, label and optionally a matplotlib format ``style``, marker ``size``, and the ``c`` and ``k``
    the point was measured at: then the theory at that c is drawn beside it, since the curve is for the slider's)."""

    def __init__(self, measured: list[dict] | None = None):
        self.measured = measured or []
        style = {"description_width": "initial"}
        self.alpha = widgets.FloatSlider(0.6, min=0.0, max=0.99, step=0.01, description="alpha", style=style,
                                         continuous_update=False)
        self.k = widgets.IntSlider(4, min=1, max=12, description="k (draft tokens)", style=style,
                                   continuous_update=False)
        self.c = widgets.FloatLogSlider(0.1, base=10, min=-2.5, max=0.3, step=0.05, description="c (cost ratio)",
                                        style=style, continuous_update=False)
        self.text = widgets.HTML()
        self.out = widgets.Output()
        for control in (self.alpha, self.k, self.c):
            control.observe(lambda _: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.alpha, self.k, self.c]), self.text, self.out])
        self.update()

    @property
    def speedup(self) -> float:
        return theory.expected_speedup(self.alpha.value, self.k.value, self.c.value)

    def update(self) -> None:
        a, k, c = self.alpha.value, self.k.value, self.c.value
        best = theory.optimal_k(a, c)
        self.text.value = (f"expected tokens per step <b>{theory.expected_tokens_per_step(a, k):.2f}</b>, "
                           f"speedup <b>{self.speedup:.2f}x</b>; best k for this alpha and c: <b>{best}</b> "
                           f"({theory.expected_speedup(a, best, c):.2f}x); break-even c at this alpha and k: "
                           f"{theory.break_even_c(a, k):.3f}")
        with self.out:
            self.out.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(7, 3.8))
            alphas = np.linspace(0, 0.99, 100)
            ax.plot(alphas, [theory.expected_speedup(x, k, c) for x in alphas], label=f"theory, k={k}, c={c:.3f}")
            ax.axhline(1.0, color="k", ls="--", lw=1, label="break-even")
            ax.plot([a], [self.speedup], "o", color="C0")
            for i, point in enumerate(self.measured):
                line = ax.plot(point["alpha"], point["speedup"], point.get("style", "s"), ms=point.get("size", 6),
                               label=point["label"])[0]
                if point.get("c"):  # measured at its own c: theory there, not on the slider's curve
                    own = theory.expected_speedup(point["alpha"], point.get("k", k), point["c"])
                    ax.plot([point["alpha"]] * 2, [point["speedup"], own], ":", color=line.get_color(), lw=1)
                    ax.plot(point["alpha"], own, "o", mfc="none", color=line.get_color(), ms=7,
                            label="theory at its own c" if i == 0 else None)
            ax.set(xlabel="alpha (per-token acceptance)", ylabel="speedup", ylim=(0, None))
            ax.legend(fontsize=8)
            plt.show()
            plt.close(fig)


def speedup_explorer(measured: list[dict] | None = None) -> SpeedupExplorer:
    return SpeedupExplorer(measured)


def reference_points(profile: str, k: int) -> list[dict]:
    """The explorer's points from the shipped reference (notebook 04, full mode): per category and temperature,
    the draft model at ``k`` as alpha (from its acceptance rate) and its measured decode-only speedup, with the c it
    was measured at (c_eff, inside the engine), so the explorer holds each against the theory at its own c."""
    from helpers import results

    grid = results.load_reference("04_structured_vs_creative", profile)
    if grid is None:
        return []
    rows = grid[(grid["method"] == "draft_model") & (grid["k"] == k) & grid["acceptance_rate"].notna()]
    return [{"alpha": theory.alpha_from_acceptance_rate(row.acceptance_rate, k), "speedup": row.decode_speedup,
             "c": row.c_eff if row.c_eff == row.c_eff else None, "k": k,
             "label": f"reference: {row.category}, T={row.temperature:g}, k={k}, c_eff={row.c_eff:.2f}"}
            for row in rows.itertuples()]


class ResultsBrowser:
    """Sliders for k and temperature and a category dropdown select among precomputed results from one or more
    sources (the shipped reference, this machine's run), shown side by side in a table and a plot of speedup
    against k with the selected point marked; the "run live" button re-runs the selected point through
    ``run_live(category, k, temperature)``."""

    def __init__(self, results, run_live=None, source: str = "this run"):
        self.results = results.assign(source=source) if "source" not in results else results
        style = {"description_width": "initial"}
        self.category = widgets.Dropdown(description="category")
        self.k = widgets.SelectionSlider(options=[0], description="k", style=style, continuous_update=False)
        self.temperature = widgets.SelectionSlider(options=[0.0], description="temperature", style=style,
                                                   continuous_update=False)
        self.table = widgets.HTML()
        self.plot = widgets.Output()
        self.button = widgets.Button(description="run live", icon="play", disabled=run_live is None)
        self.live = widgets.Output()
        self._run_live = run_live
        self._set_options()
        for control in (self.category, self.k, self.temperature):
            control.observe(lambda _: self.update(), names="value")
        self.button.on_click(lambda _: self.run_live())
        self.widget = widgets.VBox([widgets.HBox([self.category, self.k, self.temperature]), self.table,
                                    self.plot, self.button, self.live])
        self.update()

    def _set_options(self) -> None:
        """Options are the union over sources; keep the current selection where it still exists."""
        r = self.results
        self._quiet = True  # one update after all three controls changed, not one per control
        for control, options in ((self.category, sorted(r["category"].unique())),
                                 (self.k, sorted(int(k) for k in r["k"].unique())),
                                 (self.temperature, sorted(float(t) for t in r["temperature"].unique()))):
            current = control.value
            control.options = options
            control.value = current if current in options else options[0]
        self._quiet = False

    def add(self, results, source: str) -> None:
        """Show ``results`` from ``source`` beside what is already shown (replacing an earlier ``source``)."""
        self.results = pd.concat([self.results[self.results["source"] != source], results.assign(source=source)],
                                 ignore_index=True)
        self._set_options()
        self.update()

    def selected(self):
        r = self.results
        return r[(r["category"] == self.category.value) & (r["k"] == self.k.value)
                 & (r["temperature"] == self.temperature.value)]

    def update(self) -> None:
        if getattr(self, "_quiet", False):
            return
        rows = self.selected()
        cols = ["source", "arm", "speedup", "speedup_ci_low", "speedup_ci_high", "interval", "acceptance_rate",
                "mean_acceptance_length"]
        self.table.value = ("<i>not measured by any source at this point</i>" if rows.empty else
                            rows[[c for c in cols if c in rows]].to_html(index=False, float_format=lambda x: f"{x:.2f}"))
        curve = self.results[(self.results["category"] == self.category.value)
                             & (self.results["temperature"] == self.temperature.value)]
        self.marked = {}  # source -> (k, speedup) of the circled point, as plotted
        with self.plot:
            self.plot.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(6.5, 3))
            for index, (source, group) in enumerate(curve.sort_values("k").groupby("source", sort=False)):
                err = [group["speedup"] - group["speedup_ci_low"], group["speedup_ci_high"] - group["speedup"]]
                ax.errorbar(group["k"], group["speedup"], yerr=err, marker="o", capsize=3, color=f"C{index}",
                            label=source)
                chosen = group[group["k"] == self.k.value]
                ax.plot(chosen["k"], chosen["speedup"], "o", ms=14, mfc="none", mec="k", mew=2)
                for k, value in zip(chosen["k"], chosen["speedup"]):
                    self.marked[source] = (int(k), float(value))
            ax.axhline(1, color="k", ls="--", lw=1)
            selected = int(self.k.value)  # shaded: the selection, also where nothing was measured
            ax.axvspan(selected - 0.25, selected + 0.25, color="gold", alpha=0.3, lw=0, zorder=0)
            ks = [int(k) for k in self.k.options]
            ax.set_xticks(ks, [str(k) for k in ks])
            ax.set(xlabel="k (draft tokens)", ylabel="speedup", xlim=(min(ks) - 0.5, max(ks) + 0.5),
                   title=f"{self.category.value}, T = {self.temperature.value:g} (shaded, circled: selected k)")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the plot, off the points
            plt.show()
            plt.close(fig)

    def run_live(self) -> None:
        if self._run_live is None:
            return
        with self.live:
            self.live.clear_output()
            # slider options come from a DataFrame (numpy scalars): hand the engine plain Python numbers
            print(self._run_live(self.category.value, int(self.k.value), float(self.temperature.value)))


class Checklist:
    """The decision checklist: workload, temperature, prompt and answer length, concurrency, card and model pair ->
    :func:`helpers.checklist.recommend` on this kit's measurements, with a reason per answer and where the
    speedups were measured. ``beside`` (label -> measurements, e.g. the shipped reference) adds each source's verdict
    for the same answers under the main one."""

    def __init__(self, data: checklist.Measurements, pairs: dict[str, tuple[object, object, str]],
                 beside: dict[str, checklist.Measurements] | None = None):
        self.data, self.pairs, self.beside = data, pairs, beside or {}
        style = {"description_width": "initial"}
        temps = sorted(data.acceptance["temperature"].unique()) if data.acceptance is not None else [0.0]
        workloads = data.workloads()
        self.workload = widgets.Dropdown(options=workloads, description="workload",
                                         value="structured" if "structured" in workloads else workloads[0])
        self.temperature = widgets.FloatSlider(temps[0], min=0.0, max=max(1.0, temps[-1]), step=0.1,
                                               description="temperature", style=style, continuous_update=False)
        self.prompt_tokens = widgets.IntSlider(256, min=16, max=8192, step=16, description="prompt tokens",
                                               style=style, continuous_update=False)
        self.output_tokens = widgets.IntSlider(256, min=16, max=2048, step=16, description="answer tokens",
                                               style=style, continuous_update=False)
        self.concurrency = widgets.IntSlider(1, min=1, max=256, description="concurrent requests", style=style,
                                             continuous_update=False)
        self.gpu_gb = widgets.FloatSlider(96, min=8, max=192, step=8, description="GPU memory (GB)", style=style,
                                          continuous_update=False)
        self.pair = widgets.Dropdown(options=list(pairs), description="model pair", style=style,
                                     layout=widgets.Layout(width="auto"))  # the pairs' names are long: not cut off
        self.gpu = widgets.Dropdown(options=list(checklist.GPUS), description="GPU (roofline, another pair)",
                                    style=style, layout=widgets.Layout(width="auto"))
        self.result = widgets.HTML()
        controls = (self.workload, self.temperature, self.prompt_tokens, self.output_tokens, self.concurrency,
                    self.gpu_gb, self.pair, self.gpu)
        for control in controls:
            control.observe(lambda _: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox(controls[:4]), widgets.HBox(controls[4:]), self.result])
        self.update()

    def answers(self) -> checklist.Answers:
        target, draft, dtype = self.pairs[self.pair.value]
        return checklist.Answers(self.workload.value, self.temperature.value, self.prompt_tokens.value,
                                 self.concurrency.value, self.gpu_gb.value, target, draft, dtype,
                                 output_tokens=self.output_tokens.value, gpu=self.gpu.value)

    def update(self) -> None:
        answers = self.answers()
        self.recommendation = checklist.recommend(answers, self.data)
        parts = [f"<h4>{self.recommendation['verdict']}</h4>"]
        for label, data in self.beside.items():
            try:
                verdict = checklist.recommend(answers, data)["verdict"]
            except ValueError as error:  # e.g. a workload the other source did not measure
                verdict = f"no verdict: {error}"
            parts.append(f"<p>Beside it, <b>{label}</b>: {verdict}</p>")
        parts.append(f"<p>Acceptance and step costs measured on {self.recommendation['source']}.</p>")
        for option in self.recommendation["options"]:
            items = "".join(f"<li>{reason}</li>" for reason in option["reasons"])
            parts.append(f"<b>{option['method']}</b>: predicted {checklist.stated_speedup(option)} "
                         f"{option['quantity']} speedup<ul>{items}</ul>")
        parts.append(f"<i>{self.recommendation['caveat']}</i>")
        self.result.value = "".join(parts)
