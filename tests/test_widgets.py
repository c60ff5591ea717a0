import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from helpers.theory import expected_speedup, optimal_k  # noqa: E402
from helpers.widgets import speedup_explorer  # noqa: E402


def test_sliders_drive_the_prediction():
    explorer = speedup_explorer([{"alpha": 0.5, "speedup": 0.9, "label": "measured"}])
    explorer.alpha.value, explorer.k.value, explorer.c.value = 0.8, 3, 0.05
    assert explorer.speedup == pytest.approx(expected_speedup(0.8, 3, 0.05))
    assert f"{explorer.speedup:.2f}x" in explorer.text.value
    assert f"best k for this alpha and c: <b>{optimal_k(0.8, 0.05)}</b>" in explorer.text.value
    explorer.alpha.value = 0.0
    assert explorer.speedup < 1
    assert all(not s.continuous_update for s in (explorer.alpha, explorer.k, explorer.c))


def test_results_browser_selects_precomputed_rows_and_runs_live():
    import pandas as pd

    from helpers.widgets import ResultsBrowser

    results = pd.DataFrame([
        {"category": c, "k": k, "temperature": t, "arm": f"draft k={k}", "speedup": k * 0.1 + t,
         "speedup_ci_low": 0.0, "speedup_ci_high": 2.0, "acceptance_rate": 0.5, "mean_acceptance_length": 2.0}
        for c in ("creative", "structured") for k in (2, 4) for t in (0.0, 1.0)])
    calls = []
    browser = ResultsBrowser(results, run_live=lambda c, k, t: calls.append((c, k, t)) or "live text")
    # drive it with the widget's own option values (numpy scalars from the DataFrame), as a user's click does
    browser.category.value = "structured"
    browser.k.value, browser.temperature.value = browser.k.options[-1], browser.temperature.options[-1]
    assert "1.40" in browser.table.value and len(browser.selected()) == 1
    browser.button.click()
    assert calls == [("structured", 4, 1.0)]
    # engines.validate refuses a numpy integer k (isinstance(k, int)): run_live must receive plain numbers
    assert type(calls[0][1]) is int and type(calls[0][2]) is float
    assert not browser.k.continuous_update


def test_results_browser_opens_from_the_reference_and_adds_this_run():
    import pandas as pd

    from helpers.widgets import ResultsBrowser

    def rows(ks, temps, speedup):
        return pd.DataFrame([{"category": "structured", "k": k, "temperature": t, "arm": f"draft k={k}",
                              "speedup": speedup, "speedup_ci_low": speedup - 0.1, "speedup_ci_high": speedup + 0.1}
                             for k in ks for t in temps])
    browser = ResultsBrowser(rows([1, 2, 4, 8], [0.0, 0.5, 1.0], 1.3), source="reference: CPU, 2026-12-03")
    assert list(browser.k.options) == [1, 2, 4, 8] and "reference" in browser.table.value
    browser.k.value, browser.temperature.value = 4, 0.0
    browser.add(rows([4], [0.0, 1.0], 0.9), "this machine")
    assert (browser.k.value, browser.temperature.value) == (4, 0.0)  # the selection survives the new options
    assert "this machine" in browser.table.value and "reference" in browser.table.value
    assert len(browser.selected()) == 2
    assert browser.marked == {"reference: CPU, 2026-12-03": (4, 1.3), "this machine": (4, 0.9)}
    browser.k.value = 8  # measured by the reference only: the table says so by showing only its row
    assert "this machine" not in browser.table.value and len(browser.selected()) == 1


def test_reference_points_are_the_shipped_draft_model_rows_at_the_asked_k():
    from helpers import results
    from helpers.theory import alpha_from_acceptance_rate
    from helpers.widgets import reference_points

    grid = results.load_reference("04_structured_vs_creative", "cpu")
    if grid is None:
        pytest.skip("no reference shipped: test_reference_is_not_stale fails for that")
    rows = grid[(grid["method"] == "draft_model") & (grid["k"] == 4)]
    points = reference_points("cpu", 4)
    assert len(points) == len(rows) > 0 and all(", k=4," in p["label"] and p["c"] is not None for p in points)
    first = rows.iloc[0]
    assert points[0]["alpha"] == pytest.approx(alpha_from_acceptance_rate(first["acceptance_rate"], 4))
    assert points[0]["speedup"] == first["decode_speedup"]
    assert reference_points("cpu", 99) == []
