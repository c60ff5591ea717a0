"""The real-browser test runs only through `make e2e` (SPECDEC_E2E=1): it starts JupyterLab, drives Debian's chromium
and runs real vLLM engines for 7-8 minutes on 2 cores. `make test` (`pytest tests notebooks`) does not collect it, and
needs neither Playwright nor chromium."""

import os
import signal

import pytest

if os.environ.get("SPECDEC_E2E") != "1":
    collect_ignore_glob = ["test_*.py"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def lab():
    """A private JupyterLab on 127.0.0.1 (SPECDEC_FAST=1 in its kernels' environment); always stopped, with its
    kernels and what they started, also when a test fails or the run is terminated (SIGTERM as Ctrl+C)."""
    import e2e_lab

    previous = signal.signal(signal.SIGTERM, _interrupt)
    server = e2e_lab.start_lab()
    e2e_lab.log(f"JupyterLab at {server.url} (log: {server.log_path.relative_to(e2e_lab.ROOT)})")
    try:
        yield server
    finally:
        e2e_lab.stop_lab(server)
        signal.signal(signal.SIGTERM, previous)
        e2e_lab.log("JupyterLab stopped")


@pytest.fixture(scope="session")
def browser(lab):
    """Debian's chromium through Playwright (executable_path; Playwright's own browsers are never downloaded)."""
    import e2e_lab
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        chromium = e2e_lab.launch_browser(playwright)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(request, lab, browser):
    """A fresh browser context and page per test; a screenshot when the test failed; the test's kernels ended."""
    import e2e_lab

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    tab = context.new_page()
    try:
        yield tab
    finally:
        try:
            report = getattr(request.node, "rep_call", None)
            if report is None or report.failed:
                e2e_lab.log(f"screenshot: {e2e_lab.screenshot(tab, f'FAILED-{request.node.name}')}")
        finally:
            context.close()
            lab.shutdown_kernels()
