"""vLLM's records and native lines go to the log file, never to outputs (any level below ERROR, on any CPU)."""

import json
import logging.config
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import helpers
from helpers import logs

ROOT = Path(__file__).resolve().parent.parent


def test_the_configuration_sends_every_record_to_the_file_and_prints_errors_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(logs.LOG_FILE_ENV, str(tmp_path / "vllm.log"))
    config = json.loads(logs.CONFIG.read_text())
    logging.config.dictConfig(config)
    log = logging.getLogger("vllm.some.module")
    log.info("an info line")
    log.warning("a warning no machine has printed before")
    log.error("an engine failed")
    logging.getLogger("vllm").handlers[0].flush()
    out = capsys.readouterr().out
    assert "an info line" not in out and "no machine has printed" not in out and "an engine failed" in out
    written = (tmp_path / "vllm.log").read_text()
    assert "] an info line" in written and " INFO " in written and "a warning no machine" in written and "an engine failed" in written


def test_the_counter_sees_vllms_log_lines_with_and_without_a_process_prefix():
    text = ("INFO 12-03 10:24:15 [core.py:1] x\n(EngineCore_DP0 pid=12) INFO 12-03 10:24:15 [a.py:2] y\n"
            "(APIServer pid=7) WARNING 12-03 10:24:16 [b.py:3] z\nthe word INFO 12-03 10:24:17 mid-line\n"
            "[W1204 13:44:00.324773712 utils.cpp:68] Warning: NUMA binding\n")
    assert helpers.vllm_log_lines(text) == {"INFO": 2, "WARNING": 1, "DEBUG": 0, "NATIVE": 1}


ENGINE = textwrap.dedent("""
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.timing import run, sampling_params
    if __name__ == "__main__":
        run(EngineSpec("cpu"), ["Say hi."], sampling_params(0.0, 4))
        shutdown_engine()
""")


QUIET_ENV = ("VLLM_LOGGING_CONFIG_PATH", "VLLM_LOGGING_LEVEL", "VLLM_CONFIGURE_LOGGING", logs.LOG_FILE_ENV)


def test_the_switch_brings_vllms_logs_back(cpu_models):
    """SPECDEC_VLLM_LOGS=1: INFO lines and the weight-loading bar are printed again (quiet is the notebook test's)."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV}
    loud = subprocess.run([sys.executable, "-c", ENGINE], env={**env, "SPECDEC_VLLM_LOGS": "1"}, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert loud.returncode == 0 and " INFO " in loud.stdout + loud.stderr
    assert "Loading safetensors checkpoint shards" in loud.stderr


# A vLLM warning no machine has printed before, and a line written straight to file descriptor 2 as C++ code does.
EMIT = textwrap.dedent("""
    import logging, os
    def emit(where, log=True, native=True):
        if log:
            logging.getLogger("vllm.kit_test").warning("NEVER-SEEN warning from the %s", where)
        if native:
            os.write(2, f"[W1204 native line from the {where}]\\n".encode())
            print(f"a print() from the {where}")
""")


def test_an_executed_notebook_shows_no_vllm_lines_and_says_where_they_went(cpu_models, tmp_path, monkeypatch):
    for name in QUIET_ENV:  # the kernel must get them from the kit's own imports
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(logs.LOG_FILE_ENV, str(tmp_path / "vllm.log"))
    import importlib.util

    import nbformat
    from nbclient import NotebookClient

    spec = importlib.util.spec_from_file_location("run_notebooks", ROOT / "scripts" / "run_notebooks.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    code = ENGINE.replace('if __name__ == "__main__":\n', "").replace("\n    ", "\n") + EMIT + textwrap.dedent("""
        from helpers import logs
        emit("notebook's logger", native=False)
        with logs.native_to_log():  # as while an engine is built or runs
            emit("notebook's native code", log=False)
        logging.getLogger("vllm.kit_test").error("AN ERROR after an engine was built")  # reaches the output
    """)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert runner.log_lines(nb) == {"INFO": 0, "WARNING": 0, "DEBUG": 0, "NATIVE": 0}, printed[-2000:]
    assert "NEVER-SEEN warning from the notebook's logger" in (tmp_path / "vllm.log").read_text()
    assert "native line from the notebook's native code" in (tmp_path / "vllm.log").read_text()
    assert "print() from the notebook's native code" in (tmp_path / "vllm.log").read_text()
    assert "native line" not in printed and "NEVER-SEEN" not in printed and "a print()" not in printed
    assert "Loading safetensors checkpoint shards" not in printed  # the weight-loading bar (not a log record)
    assert "ERROR" in printed and "AN ERROR after an engine was built" in printed, printed[-2000:]
    assert printed.startswith("vLLM's log (INFO and above, and native warnings from its C++ code): "), printed[:500]
    loud = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('print("INFO 12-03 10:24:15 [core.py:1] x")')])
    NotebookClient(loud, timeout=60, kernel_name="python3").execute()
    assert runner.log_lines(loud) == {"INFO": 1, "WARNING": 0, "DEBUG": 0, "NATIVE": 0}  # the counter sees one


# vLLM's multiprocess engine (EngineCore in a process of its own, as `vllm serve` runs it), with the kit's plugin
# left out by a VLLM_PLUGINS allow-list: its logger and native output reach the file only, and a sampled request
# is refused because the engine process never loaded the correction (greedy still runs).
MULTIPROCESS = EMIT + textwrap.dedent("""
    from helpers import logs
    from helpers.cpu_expand_fix import DefectiveSampling
    from helpers.engines import EngineSpec, get_engine, shutdown_engine
    from helpers.timing import run, sampling_params
    if __name__ == "__main__":
        emit("main process", native=False)
        with logs.native_to_log():
            emit("main process's native code", log=False)
        spec = EngineSpec("cpu", "draft_model", k=2)
        llm = get_engine(spec)
        llm.collective_rpc(lambda worker: emit("engine process"))
        print("GREEDY:", run(spec, ["Say hi."], sampling_params(0.0, 4))["outputs"][0].outputs[0].text)
        try:
            run(spec, ["Say hi."], sampling_params(1.0, 4))
        except DefectiveSampling as error:
            print("REFUSED:", error)
        try:  # the engine's process dies: the user sees the error and where the log is
            llm.collective_rpc(lambda worker: os._exit(3), timeout=30)
        except Exception:
            pass
        try:
            run(spec, ["Say hi."], sampling_params(0.0, 4))
        except Exception as error:
            print("CRASHED:", type(error).__name__, *getattr(error, "__notes__", []))
""")


def test_a_multiprocess_engine_logs_to_the_file_and_refuses_sampling_without_the_correction(cpu_models, tmp_path):
    from helpers import cpu_expand_fix

    if not cpu_expand_fix.self_check()[0]:
        pytest.skip("this vLLM samples correctly as installed: nothing to refuse")
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV}
    env.update({logs.LOG_FILE_ENV: str(tmp_path / "vllm.log"), "VLLM_ENABLE_V1_MULTIPROCESSING": "1",
                "VLLM_PLUGINS": "some_other_plugin", "VLLM_ALLOW_INSECURE_SERIALIZATION": "1"})
    out = subprocess.run([sys.executable, "-c", MULTIPROCESS], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    printed = out.stdout + out.stderr
    assert out.returncode == 0, printed[-3000:]
    written = (tmp_path / "vllm.log").read_text()
    for where in ("main process", "engine process"):
        assert f"NEVER-SEEN warning from the {where}" in written, written[-3000:]
    for where in ("main process's native code", "engine process"):
        assert f"native line from the {where}" in written, written[-3000:]
    assert "NEVER-SEEN" not in printed and "native line" not in printed and "a print()" not in printed, printed[-3000:]
    assert helpers.vllm_log_lines(printed) == {"INFO": 0, "WARNING": 0, "DEBUG": 0, "NATIVE": 0}, printed[-3000:]
    assert "GREEDY:" in printed and "REFUSED:" in printed and "left no record of the kit's plugin" in printed
    crashed = printed[printed.index("CRASHED:"):]
    assert f"vLLM's log (INFO and above, and native warnings from its C++ code): {tmp_path / 'vllm.log'}" in crashed


def test_a_failed_engine_build_names_the_log(cpu_models):
    """vLLM refuses the configuration (a context far beyond the model's): the error reaches the user with the path
    of the log file attached."""
    from helpers.engines import EngineSpec, get_engine

    with pytest.raises(Exception) as failure:
        get_engine(EngineSpec("cpu", max_model_len=10**7))
    assert logs.log_file().name in "\n".join(getattr(failure.value, "__notes__", [])), failure.value
