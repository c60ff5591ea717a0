"""`python -m helpers.decide`: bad input is refused before anything starts. Against a running deployment (it counts
prompts with the deployment's own tokenizer and context, measures as notebook 07 does, and writes the report) it is
tested in tests/test_serving_vllm.py, on the same two real servers as vLLM's benchmark client."""

import pytest

from helpers import decide, serving


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
