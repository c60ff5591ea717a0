"""The notebooks in a real browser (`make e2e`): JupyterLab + Debian's chromium driven by Playwright, fast mode.

Run all cells of 02, 04 and 06 through the UI; every widget renders as a widget; 04's sliders and dropdown change the
shown point quickly, and before anything is measured (only the setup cell and "Start from the reference" run);
"run live" prints generated text; 06's checklist changes its verdict when the answers change. Screenshots and the
measured times go to build/screenshots/.
"""

from __future__ import annotations

import json
import os
import re

import e2e_lab as e2e

# Fast mode on 2 cores: 02 ~3.5 min, 04 ~2.5 min, 06 ~2 min; generous, for a loaded machine.
RUN_ALL_S = float(os.environ.get("SPECDEC_E2E_RUN_ALL_S", 1500))
SETUP_CELL_S = 600
RUN_LIVE_S = 600
# From the action (keydown on the handle, change of the <select>) to the changed table or text in the page.
SHOWN_POINT_MS = 300
# To the new plot image: the kernel draws a matplotlib figure first. Reported beside the table's time.
PLOT_MS = float(os.environ.get("SPECDEC_E2E_PLOT_MS", 1000))
NB02, NB04, NB06 = ("notebooks/02_how_speculation_works.ipynb", "notebooks/04_structured_vs_creative.ipynb",
                    "notebooks/06_should_i_turn_it_on.ipynb")
BROWSER_PARTS = {"table": ":scope > .widget-html", "plot": ":scope > .widget-output"}
TIMINGS: dict[str, dict] = {}


def record(name: str, value) -> None:
    TIMINGS[name] = value
    e2e.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (e2e.SCREENSHOTS / "timings.json").write_text(json.dumps(TIMINGS, indent=1))
    e2e.log(f"{name}: {value}")


def check_browser_responds(root, step: str, with_plot: bool = True) -> None:
    """Move the category dropdown, then k, then temperature by one option; each time the table (the selected
    point's numbers) and, with ``with_plot``, the plot (its circled point) must change in time."""
    actions = [("category", e2e.choose_other(e2e.control(root, "category", ".widget-dropdown"))),
               ("k", e2e.move_slider(e2e.control(root, "k"))),
               ("temperature", e2e.move_slider(e2e.control(root, "temperature")))]
    for name, action in actions:
        before = {c: e2e.readout(e2e.control(root, c)) for c in ("k", "temperature")}
        parts = BROWSER_PARTS if with_plot else {"table": BROWSER_PARTS["table"]}
        ms = e2e.timed_change(root, parts, action, tuple(parts))
        after = {c: e2e.readout(e2e.control(root, c)) for c in ("k", "temperature")}
        record(f"{step}: {name}", {"ms": ms, "k": [before["k"], after["k"]],
                                   "temperature": [before["temperature"], after["temperature"]]})
        if name != "category":
            assert before[name] != after[name], f"{step}: the {name} slider did not move ({before} -> {after})"
        assert ms["table"] is not None, f"{step}: {name} changed, the table did not: {root.inner_text()[:500]}"
        assert ms["table"] <= SHOWN_POINT_MS, f"{step}: {name}: table changed after {ms['table']:.0f} ms"
        if with_plot:
            assert ms["plot"] is not None, f"{step}: {name} changed, the plot did not"
            assert ms["plot"] <= PLOT_MS, f"{step}: {name}: plot changed after {ms['plot']:.0f} ms"


def test_04_sliders_work_from_the_reference_before_running(lab, page):
    nb = e2e.Notebook(page, lab, NB04)
    assert set(nb.prompts()) == {"[ ]:"}, f"the notebook is not clean: {nb.prompts()}"
    assert nb.panel.locator("h2", has_text="Start from the reference").count() == 1
    nb.run_cell(nb.cell("profile = active_profile()"), SETUP_CELL_S)
    nb.run_cell(nb.cell("ResultsBrowser(reference"), SETUP_CELL_S)
    ran = [p for p in nb.prompts() if p != "[ ]:"]
    assert len(ran) == 2, f"only the setup and reference cells should have run: {nb.prompts()}"
    assert not nb.errors(), nb.errors()
    text = nb.cell("ResultsBrowser(reference").locator(".jp-Cell-outputArea").inner_text()
    assert "no reference for profile" not in text, f"04 found no shipped reference (data/reference/): {text}"
    assert nb.check_widgets_rendered(minimum=1) == 1
    root = nb.panel.locator(e2e.BROWSER)
    assert root.count() == 1
    root.scroll_into_view_if_needed()
    e2e.screenshot(page, "04-reference-before")
    check_browser_responds(root, "04 reference, nothing measured")
    e2e.screenshot(page, "04-reference-after-moves")


def test_02_runs_and_widgets_render(lab, page):
    nb = e2e.Notebook(page, lab, NB02)
    record("02: run all s", round(nb.run_all(RUN_ALL_S)))
    nb.check_cells_ran()
    nb.check_widgets_rendered(minimum=2)
    explorers = nb.panel.locator(e2e.EXPLORER)
    assert explorers.count() == 2, f"{explorers.count()} speedup explorers, expected the reference's and this run's"
    root = explorers.last
    root.scroll_into_view_if_needed()
    ms = e2e.timed_change(root, {"text": ":scope > .widget-html", "plot": ":scope > .widget-output"},
                          e2e.move_slider(e2e.control(root, "k (draft tokens)")), ("text", "plot"))
    record("02 explorer: k", ms)
    assert ms["text"] is not None and ms["text"] <= SHOWN_POINT_MS, ms
    e2e.screenshot(page, "02-after-run-all")


def test_04_runs_sliders_and_run_live(lab, page):
    nb = e2e.Notebook(page, lab, NB04)
    record("04: run all s", round(nb.run_all(RUN_ALL_S)))
    nb.check_cells_ran()
    nb.check_widgets_rendered(minimum=2)
    browsers = nb.panel.locator(e2e.BROWSER)
    assert browsers.count() == 2, f"{browsers.count()} results browsers, expected one at the top and one at the end"
    root = browsers.last
    root.scroll_into_view_if_needed()
    e2e.screenshot(page, "04-after-run-all")
    check_browser_responds(root, "04 after run all")
    e2e.screenshot(page, "04-after-moves")

    live = root.locator(":scope > .widget-output").nth(1)
    button = root.locator(":scope > .widget-button")
    assert button.inner_text().strip() == "run live" and button.is_enabled()
    button.click()
    nb.wait_until(lambda: "speculative k=" in live.inner_text() or "Traceback" in live.inner_text(), RUN_LIVE_S,
             "run live to print")
    text = live.inner_text()
    assert "Traceback" not in text, f"run live failed:\n{text[-2000:]}"
    generated = [line for line in text.splitlines()
                 if line.strip() and not line.startswith(("baseline (", "speculative k="))]
    record("04: run live output", text[:300])
    assert text.startswith("baseline (") and generated, f"run live printed no generated text:\n{text}"
    live.scroll_into_view_if_needed()
    e2e.screenshot(page, "04-run-live")


def test_06_checklist_verdict_follows_answers(lab, page):
    nb = e2e.Notebook(page, lab, NB06)
    record("06: run all s", round(nb.run_all(RUN_ALL_S)))
    nb.check_cells_ran()
    nb.check_widgets_rendered(minimum=2)
    checklists = nb.panel.locator(e2e.CHECKLIST)
    assert checklists.count() == 2, f"{checklists.count()} checklists, expected the reference's and this machine's"
    for which, root in (("reference", checklists.first), ("this machine", checklists.last)):
        root.scroll_into_view_if_needed()
        verdict = root.locator(":scope > .widget-html h4")
        result = {"result": ":scope > .widget-html"}
        first = verdict.inner_text()
        ms = e2e.timed_change(root, result, e2e.choose_other(e2e.control(root, "workload", ".widget-dropdown")),
                              ("result",))
        record(f"06 {which} checklist: workload", {"ms": ms, "verdict": [first, verdict.inner_text()]})
        assert ms["result"] is not None, f"06 {which}: another workload changed nothing in the checklist"
        second = verdict.inner_text()
        ms = e2e.timed_change(root, result, e2e.move_slider(e2e.control(root, "concurrent requests")), ("result",))
        record(f"06 {which} checklist: concurrency 1 -> 2", {"ms": ms, "verdict": [second, verdict.inner_text()]})
        assert verdict.inner_text() != second, f"06 {which}: the verdict did not change with the concurrency"
        numbers = [re.findall(r"\d+\.\d+x", text) for text in (second, verdict.inner_text())]
        assert numbers[0] != numbers[1], f"06 {which}: the predicted speedup did not change: {numbers}"
        if which == "this machine":  # the reference's verdict for the same answers, labelled, under this one's
            assert "Beside it, reference: " in root.inner_text(), root.inner_text()[:800]
        e2e.screenshot(page, f"06-checklist-{which.replace(' ', '-')}")


def test_06_checklist_works_from_the_reference_before_running(lab, page):
    nb = e2e.Notebook(page, lab, NB06)
    assert set(nb.prompts()) == {"[ ]:"}, f"the notebook is not clean: {nb.prompts()}"
    nb.run_cell(nb.cell("profile = active_profile()"), SETUP_CELL_S)
    nb.run_cell(nb.cell("reference = checklist.reference_measurements"), SETUP_CELL_S)
    assert len([p for p in nb.prompts() if p != "[ ]:"]) == 2, nb.prompts()
    assert not nb.errors(), nb.errors()
    assert nb.check_widgets_rendered(minimum=1) == 1
    root = nb.panel.locator(e2e.CHECKLIST)
    assert root.count() == 1
    root.scroll_into_view_if_needed()
    verdict = root.locator(":scope > .widget-html h4")
    assert "measured on the cpu profile" in root.inner_text(), root.inner_text()[:500]  # it names its source
    first = verdict.inner_text()
    ms = e2e.timed_change(root, {"result": ":scope > .widget-html"},
                          e2e.move_slider(e2e.control(root, "concurrent requests")), ("result",))
    record("06 reference checklist, nothing measured: concurrency 1 -> 2", {"ms": ms, "verdict": [first, verdict.inner_text()]})
    numbers = [re.findall(r"\d+\.\d+x", text) for text in (first, verdict.inner_text())]
    assert numbers[0] != numbers[1], f"the reference checklist's prediction did not change: {numbers}"
    assert ms["result"] is not None and ms["result"] <= SHOWN_POINT_MS, ms
    e2e.screenshot(page, "06-reference-checklist")
