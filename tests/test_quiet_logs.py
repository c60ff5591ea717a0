"""vLLM's INFO logs and the known harmless warnings stay out of outputs; other warnings do not."""

import json
import logging.config
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import helpers

ROOT = Path(__file__).resolve().parent.parent


def test_logging_config_drops_known_harmless_and_keeps_other_warnings(capsys):
    config = json.loads(Path(helpers.__file__).with_name("vllm_logging.json").read_text())
    config["formatters"]["vllm"] = {"format": "%(levelname)s %(message)s"}  # vLLM's formatter needs its record factory
    logging.config.dictConfig(config)
    log = logging.getLogger("vllm.some.module")
    log.info("an info line")
    log.warning("Enforce eager set, disabling torch.compile")
    log.warning("KV cache is almost full")
    out = capsys.readouterr().out
    assert "an info line" not in out and "Enforce eager" not in out
    assert "WARNING KV cache is almost full" in out


def test_the_counter_sees_vllms_log_lines_with_and_without_a_process_prefix():
    text = ("INFO 12-03 10:24:15 [core.py:1] x\n(EngineCore_DP0 pid=12) INFO 12-03 10:24:15 [a.py:2] y\n"
            "(APIServer pid=7) WARNING 12-03 10:24:16 [b.py:3] z\nthe word INFO 12-03 10:24:17 mid-line\n")
    assert helpers.vllm_log_lines(text) == {"INFO": 2, "WARNING": 1, "DEBUG": 0}


ENGINE = textwrap.dedent("""
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.timing import run, sampling_params
    if __name__ == "__main__":
        run(EngineSpec("cpu"), ["Say hi."], sampling_params(0.0, 4))
        shutdown_engine()
""")


def test_the_switch_brings_vllms_logs_back(cpu_models):
    """SPECDEC_VLLM_LOGS=1: INFO lines and the weight-loading bar are printed again (quiet is the notebook test's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_LOGGING_CONFIG_PATH", "VLLM_LOGGING_LEVEL")}
    loud = subprocess.run([sys.executable, "-c", ENGINE], env={**env, "SPECDEC_VLLM_LOGS": "1"}, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert loud.returncode == 0 and " INFO " in loud.stdout + loud.stderr
    assert "Loading safetensors checkpoint shards" in loud.stderr


def test_an_executed_notebook_has_no_vllm_info_lines(cpu_models, tmp_path, monkeypatch):
    for name in ("VLLM_LOGGING_CONFIG_PATH", "VLLM_LOGGING_LEVEL"):  # the kernel must get them from `import helpers`
        monkeypatch.delenv(name, raising=False)
    import importlib.util

    import nbformat
    from nbclient import NotebookClient

    spec = importlib.util.spec_from_file_location("run_notebooks", ROOT / "scripts" / "run_notebooks.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(ENGINE.replace('if __name__ == "__main__":\n', "")
                                                                     .replace("\n    ", "\n"))])
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    assert runner.log_lines(nb)["INFO"] == 0
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert not [p for p in helpers.KNOWN_HARMLESS if p in printed], printed[-2000:]
    assert "Loading safetensors checkpoint shards" not in printed  # the weight-loading bar (not a log record)
    loud = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('print("INFO 12-03 10:24:15 [core.py:1] x")')])
    NotebookClient(loud, timeout=60, kernel_name="python3").execute()
    assert runner.log_lines(loud) == {"INFO": 1, "WARNING": 0, "DEBUG": 0}  # the counter does see a log line
