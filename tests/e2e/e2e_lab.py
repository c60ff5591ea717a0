"""JupyterLab and a real browser for the end-to-end test: start and stop a private JupyterLab server, drive Debian's
chromium with Playwright, run cells through the UI and time what the widgets do.

Only the standard library and psutil at import time: `make test` collects tests/ without Playwright installed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = os.environ.get("SPECDEC_E2E_CHROMIUM", "/usr/bin/chromium")
# The flags that work on these machines: without the background-networking ones chromium keeps trying the closed
# network. Playwright adds --headless, --no-sandbox (its default chromiumSandbox=False) and a fresh --user-data-dir.
CHROMIUM_FLAGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
# JupyterLab user settings for the test's own settings folder: no news pop-up over the notebook, no autosave (the
# repo's notebooks stay as they are on disk), every cell in the DOM (no windowing).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
ERROR_TEXTS = ("Error displaying widget", "VBox(children=", "HBox(children=")
STDERR = '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]'
# A cell's own output (not one inside an Output widget) that is a widget view.
WIDGET_OUTPUT = ".jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output:has(> .jupyter-widgets)"
# The current notebook's model has loaded and each of its cells is in the DOM.
RENDERED_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.context || !panel.context.isReady || !panel.content.model) return false;
  return panel.content.model.cells.length > 0
    && panel.node.querySelectorAll('.jp-Notebook .jp-Cell').length === panel.content.model.cells.length;
}"""
KERNEL_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const session = panel && panel.sessionContext;
  const kernel = session && session.session && session.session.kernel;
  if (!kernel) return session ? 'no kernel' : 'no notebook';
  return kernel.connectionStatus === 'connected' ? kernel.status : kernel.connectionStatus;
}"""
# How many outputs of the current notebook's cells are widgets (mime type application/vnd.jupyter.widget-view+json).
WIDGET_COUNT_JS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  let n = 0;
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    for (let j = 0; j < cell.outputs.length; j++) {
      if ('application/vnd.jupyter.widget-view+json' in (cell.outputs.get(j).toJSON().data || {})) n += 1;
    }
  }
  return n;
}"""
# [code cell number, what failed] for each output of type 'error' in the current notebook's model and each stderr
# output with a traceback in the DOM (JupyterLab runs with --LabApp.expose_app_in_browser: window.jupyterapp exists).
ERRORS_JS = """(stderr) => {
  const panel = window.jupyterapp.shell.currentWidget, found = [];
  if (!panel || !panel.content || !panel.content.model) return found;
  const cells = panel.content.model.cells;
  let n = 0;
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    n += 1;
    for (let j = 0; j < cell.outputs.length; j++) {
      const out = cell.outputs.get(j).toJSON();
      if (out.output_type === 'error') found.push([n, `${out.ename}: ${out.evalue}`]);
    }
  }
  const codeCells = [...panel.node.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  for (const node of panel.node.querySelectorAll(stderr)) {
    const text = node.innerText;
    const cellNo = codeCells.indexOf(node.closest('.jp-CodeCell')) + 1;
    if (text.includes('Traceback')) found.push([cellNo, text.slice(-1500)]);
  }
  return found;
}"""
# The text of every stream output (stdout, stderr) in the current notebook's model, joined.
STREAMS_JS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells, texts = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    for (let j = 0; j < cell.outputs.length; j++) {
      const out = cell.outputs.get(j).toJSON();
      if (out.output_type === 'stream') texts.push([].concat(out.text).join(''));
    }
  }
  return texts.join('\\n');
}"""


def log(message: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Lab:
    proc: subprocess.Popen
    url: str
    token: str
    tmp: tempfile.TemporaryDirectory
    log_path: Path

    def api(self, method: str, path: str):
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """End every session and its kernel (jupyter_client kills each kernel's process group)."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def start_lab(root: Path = ROOT, env: dict | None = None, timeout: float = 120) -> Lab:
    """JupyterLab on 127.0.0.1 with a random port and token, in its own process group, with its own settings,
    workspaces, config, runtime and checkpoint folders; its kernels inherit SPECDEC_FAST=1."""
    tmp = tempfile.TemporaryDirectory(prefix="specdec-e2e-")
    base = Path(tmp.name)
    for name, settings in LAB_SETTINGS.items():
        path = base / "user-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    for sub in ("workspaces", "config", "runtime", "checkpoints"):
        (base / sub).mkdir()
    from helpers.processes import free_port

    port, token = free_port(), secrets.token_hex(16)
    run_env = {**os.environ, **(env or {}), "SPECDEC_FAST": "1", "JUPYTER_CONFIG_DIR": str(base / "config"),
               "JUPYTER_RUNTIME_DIR": str(base / "runtime")}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    log_path = ROOT / "build" / "e2e-jupyterlab.log"
    # expose_app_in_browser: window.jupyterapp, to read the notebook's model (error outputs, kernel status);
    # checkpoints outside the repo; root allowed (these machines run as root).
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", "--ServerApp.allow_root=True",
               f"--LabApp.user_settings_dir={base / 'user-settings'}", f"--LabApp.workspaces_dir={base / 'workspaces'}",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True",
               f"--FileCheckpoints.checkpoint_dir={base / 'checkpoints'}"]
    with open(log_path, "w") as out:
        proc = subprocess.Popen(command, cwd=root, env=run_env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    lab = Lab(proc, f"http://127.0.0.1:{port}", token, tmp, log_path)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            stop_lab(lab)
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{lab.log_tail()}")
        try:
            lab.api("GET", "/api/status")
            return lab
        except OSError:
            if time.monotonic() > deadline:
                stop_lab(lab)
                raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{lab.log_tail()}") from None
            time.sleep(0.5)


def stop_lab(lab: Lab) -> None:
    """Stop the server's process group, then whatever it started that outlived it: kernels run in sessions of their
    own, and vLLM engines below them."""
    import psutil

    try:
        if lab.proc.poll() is None:
            lab.shutdown_kernels()
    except OSError:
        pass
    try:
        started = psutil.Process(lab.proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(lab.proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            lab.proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    for proc in started:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(started, timeout=10)
    lab.tmp.cleanup()


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


# ---- the notebook in the page -------------------------------------------------------------------------------


class Notebook:
    """One notebook open in its own JupyterLab workspace (so no other tab is restored into the page)."""

    def __init__(self, page, lab: Lab, path: str):
        self.page, self.lab, self.path = page, lab, path
        self.name = Path(path).stem
        workspace = f"e2e-{self.name}-{secrets.token_hex(3)}"
        page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{path}?token={lab.token}")
        self.panel = page.locator(".jp-NotebookPanel").filter(
            has=page.locator(".jp-Notebook")).last
        self.panel.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
        page.wait_for_function(RENDERED_JS, timeout=120_000)
        self.wait_kernel_idle(timeout=180)

    # -- state
    def kernel_status(self) -> str:
        """'idle', 'busy', ... once the notebook's kernel is connected; before that, what it is waiting for."""
        return self.page.evaluate(KERNEL_JS)

    def dialogs(self) -> str:
        dialogs = self.page.locator(".jp-Dialog")
        return " | ".join(dialogs.all_inner_texts()) if dialogs.count() else ""

    def check_no_dialog(self) -> None:
        text = self.dialogs()
        if text:
            raise AssertionError(f"{self.name}: a dialog is open over the notebook: {text}")

    def code_cells(self):
        return self.panel.locator(".jp-Notebook .jp-CodeCell")

    def prompts(self) -> list[str]:
        return [t.strip() for t in self.panel.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt")
                .all_inner_texts()]

    def cell(self, containing: str):
        """The code cell whose source contains ``containing``."""
        cells = self.code_cells().filter(has=self.page.locator(".jp-InputArea-editor", has_text=containing))
        if cells.count() != 1:
            raise AssertionError(f"{self.name}: {cells.count()} code cells contain {containing!r}")
        return cells.first

    def errors(self) -> list[str]:
        """Per code cell: outputs of type 'error' (from the notebook model) and stderr text with a traceback."""
        return [f"code cell {n}: {what}" for n, what in self.page.evaluate(ERRORS_JS, STDERR)]

    def wait_kernel_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.kernel_status() != "idle":
            self.check_no_dialog()
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: kernel not idle after {timeout:.0f} s "
                                     f"(status {self.kernel_status()!r})")
            self.page.wait_for_timeout(500)

    # -- running
    def run_cell(self, cell, timeout: float) -> None:
        """Run one cell from the keyboard (click into its editor, Shift+Enter) and wait until it has run."""
        cell.locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")
        self.wait_until(lambda: re.fullmatch(r"\[\d+\]:", cell.locator(".jp-InputArea-prompt").inner_text().strip()),
                   timeout, "the cell to run")

    def run_all(self, timeout: float) -> float:
        """Run > Run All Cells; wait until no cell is queued or running and the kernel is idle. Returns seconds."""
        start = time.monotonic()
        self.panel.locator(".jp-Notebook .jp-Cell .jp-InputArea-prompt").first.click()
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()

        def done():  # a failed cell stops the run: the cells after it go back to "[ ]:" and _wait reports the error
            return all(re.fullmatch(r"\[\d+\]:", p) for p in self.prompts()) and self.kernel_status() == "idle"

        self.wait_until(done, timeout, "Run All Cells to finish", every_ms=2000)
        return time.monotonic() - start

    def wait_until(self, condition, timeout: float, what: str, every_ms: int = 1000) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            self.check_no_dialog()
            errors = self.errors()
            if errors:
                raise AssertionError(f"{self.name}: a cell failed while waiting for {what}:\n" + "\n".join(errors))
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: timed out after {timeout:.0f} s waiting for {what}; "
                                     f"prompts {self.prompts()}")
            self.page.wait_for_timeout(every_ms)

    # -- checks
    def check_cells_ran(self) -> None:
        """Every code cell ran, none failed, and no vLLM log line below ERROR (nor a native one) reached the cells'
        printed output."""
        from helpers import vllm_log_lines  # the kit's counter; helpers is not imported while `make test` collects

        errors = self.errors()
        assert not errors, f"{self.name}: cells failed:\n" + "\n".join(errors)
        streams = self.page.evaluate(STREAMS_JS)
        seen = vllm_log_lines(streams)  # every level below ERROR goes to the log file, native lines too
        assert not any(seen.values()), f"{self.name}: vLLM log lines in the outputs {seen}:\n{streams[-2000:]}"
        not_run = [i + 1 for i, p in enumerate(self.prompts()) if not re.fullmatch(r"\[\d+\]:", p)]
        assert not not_run, f"{self.name}: code cells {not_run} did not run (prompts {self.prompts()})"

    def check_widgets_rendered(self, minimum: int = 1, timeout: float = 30) -> int:
        """Each widget in the cells' outputs (per the notebook model) is rendered as a widget view, and no output
        shows a widget's text repr or 'Error displaying widget'. Returns the number of widget outputs."""
        outputs = self.panel.locator(WIDGET_OUTPUT)
        expected = self.page.evaluate(WIDGET_COUNT_JS)
        deadline = time.monotonic() + timeout
        while outputs.count() < expected and time.monotonic() < deadline:
            self.page.wait_for_timeout(250)
        texts = "\n".join(self.panel.locator(".jp-OutputArea-output").all_inner_texts())
        for bad in ERROR_TEXTS:
            assert bad not in texts, f"{self.name}: {bad!r} in the outputs:\n{_around(texts, bad)}"
        count = outputs.count()
        assert count == expected, f"{self.name}: {count} of the {expected} widget outputs rendered as widgets"
        assert count >= minimum, f"{self.name}: {count} widget outputs, expected at least {minimum}"
        for i in range(count):
            box = outputs.nth(i).bounding_box()
            assert box and box["height"] > 20, f"{self.name}: widget output {i + 1} is empty ({box})"
        return count


def _around(text: str, needle: str, width: int = 300) -> str:
    at = text.find(needle)
    return text[max(0, at - width): at + width]


# ---- widgets -------------------------------------------------------------------------------------------------

BROWSER = ".widget-vbox:has(> .widget-hbox .widget-dropdown):has(> .widget-button)"
CHECKLIST = ".widget-vbox:has(> .widget-hbox .widget-dropdown):has(> .widget-html h4)"
EXPLORER = ".widget-vbox:has(> .widget-hbox .widget-slider):has(> .widget-output):not(:has(.widget-dropdown))"


def control(root, label: str, kind: str = ".widget-slider"):
    """The slider or dropdown of ``root`` whose description is ``label``."""
    name = root.page.locator(".widget-label", has_text=re.compile(f"^{re.escape(label)}$"))
    found = root.locator(kind).filter(has=name)
    if found.count() != 1:
        raise AssertionError(f"{found.count()} controls {kind} labelled {label!r}")
    return found


# Installed before an action: the time of the action (keydown, or input/change of a <select>) and, per watched part,
# the time of the first mutation after which that part differs from before the action.
WATCH_JS = """([root, parts]) => {
  if (window.__e2e && window.__e2e.stop) window.__e2e.stop();
  const nodes = Object.fromEntries(Object.entries(parts).map(([k, sel]) => [k, root.querySelector(sel)]));
  const snap = (node) => node ? node.innerHTML : '';
  const before = Object.fromEntries(Object.entries(nodes).map(([k, n]) => [k, snap(n)]));
  const st = {t0: null, changed: {}, before};
  const onAction = () => { if (st.t0 === null) st.t0 = performance.now(); };
  for (const type of ['keydown', 'input', 'change', 'mousedown']) document.addEventListener(type, onAction, true);
  const check = () => {
    if (st.t0 === null) return;
    const now = performance.now();
    for (const [k, n] of Object.entries(nodes)) {
      if (!(k in st.changed) && snap(n) !== before[k]) st.changed[k] = now - st.t0;
    }
  };
  const obs = new MutationObserver(check);
  obs.observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
  st.stop = () => {
    obs.disconnect();
    for (const type of ['keydown', 'input', 'change', 'mousedown']) document.removeEventListener(type, onAction, true);
  };
  window.__e2e = st;
  return Object.fromEntries(Object.entries(nodes).map(([k, n]) => [k, n !== null]));
}"""


def timed_change(root, parts: dict[str, str], action, wait_for: tuple[str, ...], timeout_ms: int = 15_000) -> dict:
    """Run ``action`` and return, per part of ``root`` (a CSS selector relative to it), the milliseconds from the
    action to the first DOM change that made it differ from before (None: no change within the timeout)."""
    page = root.page
    found = page.evaluate(WATCH_JS, [root.element_handle(), parts])
    missing = [k for k, ok in found.items() if not ok]
    assert not missing, f"parts not found in the widget: {missing}"
    action()
    condition = " && ".join(f"('{k}' in window.__e2e.changed)" for k in wait_for)
    try:
        page.wait_for_function(f"() => {condition}", timeout=timeout_ms, polling=50)
    except Exception:  # playwright's TimeoutError: report what did change
        pass
    page.wait_for_timeout(300)  # let the rest settle before the next action
    state = page.evaluate("() => { window.__e2e.stop(); return {t0: window.__e2e.t0, changed: window.__e2e.changed}; }")
    assert state["t0"] is not None, "the action did not reach the page"
    return {k: state["changed"].get(k) for k in parts}


def move_slider(slider, key: str = "ArrowRight"):
    """An action: focus the noUiSlider handle and press ``key`` (arrows step one option; Home/End: ends)."""
    handle = slider.locator(".noUi-handle")

    def act():
        handle.focus()
        handle.press(key)
    return act


def readout(slider) -> str:
    return slider.locator(".widget-readout").inner_text().strip()


def choose_other(dropdown):
    """An action: select the option after the current one (the first if the current is the last)."""
    select = dropdown.locator("select")

    def act():
        options = select.locator("option").all_inner_texts()
        current = select.evaluate("s => s.options[s.selectedIndex].text")
        select.select_option(label=options[(options.index(current) + 1) % len(options)])
    return act
