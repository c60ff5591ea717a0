"""`python -m helpers.decide`: bad input is refused before anything starts; against a running deployment it counts
prompts with the deployment's own tokenizer and context, measures as notebook 07 does, and writes the report."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import decide, serving

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_decide(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "helpers.decide", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize(("args", "said"), [
    (["--prompts", "no_such_file.jsonl"], "no_such_file.jsonl"),
    (["--prompts", "pyproject.toml"], ".toml"),
    (["--prompts", "data/prompts/suite.jsonl", "--url", "baseline=http://127.0.0.1:9"], "no healthy server"),
    (["--prompts", "data/prompts/suite.jsonl", "--url", "localhost:8000"], "METHOD=URL"),
    (["--prompts", "data/prompts/suite.jsonl", "--concurrency", "0"], "concurrency"),
])
def test_bad_input_is_refused_before_anything_starts(args, said, capsys):
    assert decide.main(args) == 2
    err = capsys.readouterr().err
    assert "refused, nothing was started" in err and said in err, err
    assert not serving.running_servers()


def test_a_prompt_over_the_context_is_refused(tmp_path, cpu_models, capsys):
    long = tmp_path / "long.txt"
    long.write_text("tea " * 4000 + "\n")
    assert decide.main(["--prompts", str(long)]) == 2
    assert "longer" in capsys.readouterr().err.lower()


def test_against_a_deployment(tmp_path, cpu_models):
    """Two real servers stand in for a deployment: the command starts nothing and reads their context and
    tokenizer; the report holds the verdict, the table, the figure and the provenance."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Return a JSON object with a name and an age.\nWrite a SQL query counting users.\n")
    ports = free_port(), free_port()
    with serving.Server("cpu", "baseline", port=ports[0], log_dir=tmp_path, exclusive=False) as base, \
            serving.Server("cpu", "draft_model", port=ports[1], log_dir=tmp_path, exclusive=False) as spec:
        model, context, count = decide.deployment(base.base_url)
        from helpers.profiles import get_profile
        from helpers.workload_files import token_counter

        assert context == get_profile("cpu").max_model_len
        prompt = "Write a SQL query counting users."
        assert count(prompt) == token_counter(get_profile("cpu").target)(prompt)  # the server counts as the kit does
        out = run_decide("--prompts", str(prompts), "--url", f"baseline={base.base_url}",
                         "--url", f"draft_model={spec.base_url}", "--concurrency", "1", "--repetitions", "1",
                         "--max-tokens", "16", "--out", str(tmp_path / "report"), timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    report = (tmp_path / "report" / "report.md").read_text()
    for heading in ("## Verdict", "## Measured against predicted", "## Where the numbers come from"):
        assert heading in report
    assert "draft_model at concurrency 1:" in report and base.base_url in report
    assert (tmp_path / "report" / "speedup.png").stat().st_size > 10_000
    assert "<table>" in (tmp_path / "report" / "report.html").read_text()
    runs = (tmp_path / "report" / "runs.csv").read_text().splitlines()
    assert len(runs) == 3  # header, baseline, draft_model
    json.dumps(report)  # plain text
