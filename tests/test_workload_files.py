"""helpers.workload_files: every accepted format, every bad input, and the file vLLM's custom dataset reads."""

import json
import math
from pathlib import Path

import pytest

from helpers import workload_files as wf
from helpers.models import TARGET_DIR
from helpers.workloads import SUITE

VLLM_DATASETS = Path(__import__("importlib.util").util.find_spec("vllm").submodule_search_locations[0]) / \
    "benchmarks" / "datasets" / "datasets.py"
words = lambda prompt: len(prompt.split())  # a token counter for tests: one token per word


def texts(prompts):
    return [p.text for p in prompts]


# ------------------------------------------------------------------------------------------- formats


def test_jsonl_with_prompt_field(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "Write a haiku about tea.", "note": "ignored"}\n\n{"prompt": "Name three rivers."}\n')
    prompts = wf.load_prompts(path)
    assert texts(prompts) == ["Write a haiku about tea.", "Name three rivers."]
    assert [p.where for p in prompts] == ["line 1", "line 3"]


def test_the_kits_suite_loads_as_it_is():
    rows = [json.loads(line) for line in SUITE.read_text().splitlines() if line.strip()]
    assert texts(wf.load_prompts(SUITE)) == [row["prompt"] for row in rows]


def test_csv_with_prompt_column_and_a_multiline_field(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text('id,prompt\n1,Write a haiku about tea.\n2,"Fix this code:\ndef f(:\n    pass"\n')
    prompts = wf.load_prompts(path)
    assert texts(prompts) == ["Write a haiku about tea.", "Fix this code:\ndef f(:\n    pass"]
    assert [p.where for p in prompts] == ["row 2", "row 3"]


def test_text_one_prompt_per_line(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Write a haiku about tea.\n\n   \nName three rivers.\n")
    prompts = wf.load_prompts(path)
    assert texts(prompts) == ["Write a haiku about tea.", "Name three rivers."]
    assert [p.where for p in prompts] == ["line 1", "line 4"]


def test_text_paragraphs_keep_line_breaks(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Fix this code:\ndef f(:\n    pass\n\n\nName three rivers.\n")
    prompts = wf.load_prompts(path, text_mode="paragraphs")
    assert texts(prompts) == ["Fix this code:\ndef f(:\n    pass", "Name three rivers."]
    assert [p.where for p in prompts] == ["line 1", "line 6"]


def test_pasted_text_both_modes():
    pasted = "Write a haiku.\nName three rivers.\n\nList two planets.\n"
    assert texts(wf.prompts_from_text(pasted)) == ["Write a haiku.", "Name three rivers.", "List two planets."]
    assert texts(wf.prompts_from_text(pasted, "paragraphs")) == ["Write a haiku.\nName three rivers.",
                                                                  "List two planets."]


def test_prepare_workload_from_each_kind_of_source(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Write a haiku.\nName three rivers.\n")
    for source in (path, str(path), "Write a haiku.\nName three rivers.", ["Write a haiku.", "Name three rivers."]):
        workload = wf.prepare_workload(source, max_model_len=2048, max_tokens=64, tokenizer=words)
        assert workload.prompts == ("Write a haiku.", "Name three rivers.")
        assert workload.prompt_tokens == (3, 3) and workload.num_prompts == 2 and len(workload) == 2
    assert wf.prepare_workload("Just one pasted prompt.", max_model_len=2048).prompts == ("Just one pasted prompt.",)
    assert wf.prepare_workload(path, max_model_len=2048, num_prompts=5).num_prompts == 5


# ------------------------------------------------------------------------------------------- bad inputs


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl does not exist"):
        wf.load_prompts(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match="does not exist"):  # a str that names a file, not pasted text
        wf.prepare_workload(str(tmp_path / "nope.csv"), max_model_len=2048)


@pytest.mark.parametrize("name", ["empty.jsonl", "empty.csv", "empty.txt"])
def test_empty_file(tmp_path, name):
    path = tmp_path / name
    path.write_text("\n  \n")
    with pytest.raises(ValueError, match="is empty"):
        wf.load_prompts(path)


def test_file_with_no_prompts(tmp_path):
    path = tmp_path / "header_only.csv"
    path.write_text("id,prompt\n")
    with pytest.raises(ValueError, match="holds no prompts"):
        wf.load_prompts(path)


@pytest.mark.parametrize("name", ["prompts.json", "prompts.xlsx", "prompts"])
def test_unknown_format(tmp_path, name):
    path = tmp_path / name
    path.write_text("Write a haiku.\n")
    with pytest.raises(ValueError, match=r"unknown prompt file format .*\.csv.*\.jsonl.*\.txt"):
        wf.load_prompts(path)


def test_jsonl_errors_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n{"prompt": "broken\n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        wf.load_prompts(path)
    path.write_text('{"prompt": "ok"}\n{"text": "wrong field"}\n')
    with pytest.raises(ValueError, match=r"line 2 has no 'prompt' field \(it has \['text'\]\)"):
        wf.load_prompts(path)
    path.write_text('{"prompt": "ok"}\n{"prompt": 42}\n')
    with pytest.raises(ValueError, match="line 2: the prompt must be a string"):
        wf.load_prompts(path)
    path.write_text('{"prompt": "ok"}\n{"prompt": "  "}\n')
    with pytest.raises(ValueError, match="line 2: the prompt is empty"):
        wf.load_prompts(path)


def test_csv_errors(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("id,text\n1,Write a haiku.\n")
    with pytest.raises(ValueError, match=r"no 'prompt' column .*\['id', 'text'\]"):
        wf.load_prompts(path)
    path.write_text("id,prompt\n1,Write a haiku.\n2,\n")
    with pytest.raises(ValueError, match="row 3: the prompt is empty"):
        wf.load_prompts(path)


def test_bad_text_mode_and_empty_pasted_text():
    with pytest.raises(ValueError, match="text_mode"):
        wf.prompts_from_text("a", mode="sentences")
    with pytest.raises(ValueError, match="pasted text holds no prompts"):
        wf.prepare_workload("\n\n", max_model_len=2048)
    with pytest.raises(ValueError, match="list of prompts is empty"):
        wf.prepare_workload([], max_model_len=2048)
    with pytest.raises(ValueError, match="prompt #2 of the list is empty"):
        wf.prepare_workload(["fine", " "], max_model_len=2048)


@pytest.mark.parametrize("settings, message", [
    ({"concurrency": 0}, "concurrency must be a whole number >= 1, got 0"),
    ({"concurrency": 1.5}, "concurrency must be a whole number"),
    ({"temperature": -0.1}, "temperature must be a number >= 0"),
    ({"temperature": math.nan}, "temperature must be a number >= 0"),
    ({"max_tokens": 0}, "max_tokens must be a whole number >= 1, got 0"),
    ({"num_prompts": 0}, "num_prompts must be a whole number >= 1"),
    ({"request_rate": 0}, "request_rate must be > 0"),
])
def test_run_settings_rejected_before_anything_is_read(settings, message):
    with pytest.raises(ValueError, match=message):
        wf.prepare_workload("/no/such/file.jsonl", max_model_len=2048, **settings)  # the settings fail first


def test_too_long_prompts_are_named_by_index_and_first_words():
    prompts = ["short prompt", "word " * 50 + "end", "fine too", "long " * 60]
    with pytest.raises(ValueError) as error:
        wf.prepare_workload(prompts, max_model_len=64, max_tokens=16, tokenizer=words)
    message = str(error.value)
    assert "2 of 4 prompts are longer than 48 tokens (max_model_len 64 minus max_tokens 16)" in message
    assert "#2 (list item 2): 51 tokens, 'word word word word word word word word ...'" in message
    assert "#4 (list item 4): 60 tokens" in message
    assert "#1" not in message and "#3" not in message


def test_too_long_lists_only_the_first_few(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("\n".join(["a b c d e f"] * 9))
    with pytest.raises(ValueError, match=r"(?s)9 of 9 prompts.*and 4 more: #6, #7, #8, #9") as error:
        wf.prepare_workload(path, max_model_len=8, max_tokens=4, tokenizer=words)
    assert "#1 (line 1): 6 tokens" in str(error.value)


def test_max_tokens_leaving_no_room():
    with pytest.raises(ValueError, match="leaves no room for a prompt"):
        wf.prepare_workload(["hi"], max_model_len=64, max_tokens=64, tokenizer=words)


def test_length_check_with_the_real_tokenizer_counts_the_chat_template():
    from transformers import AutoTokenizer

    if not (TARGET_DIR / "tokenizer.json").exists():
        pytest.skip("offline models not built (`make models`)")
    tokenizer = AutoTokenizer.from_pretrained(str(TARGET_DIR))
    bare = len(tokenizer("Hello there")["input_ids"])
    workload = wf.prepare_workload(["Hello there"], max_model_len=2048, max_tokens=64, tokenizer=tokenizer)
    assert workload.prompt_tokens[0] > bare  # the template's role markers count too, as on the server
    assert wf.prepare_workload(["Hello there"], max_model_len=2048, tokenizer=str(TARGET_DIR)).prompt_tokens == \
        workload.prompt_tokens
    long = "lighthouse " * 2000
    with pytest.raises(ValueError, match=r"(?s)1 of 2 prompts .*chat template.*#2 \(list item 2\): \d+ tokens, 'lighthouse"):
        wf.prepare_workload(["Hello there", long], max_model_len=2048, max_tokens=64, tokenizer=tokenizer)


# ------------------------------------------------------------------------------------------- the file for vLLM


def test_written_dataset_is_what_vllms_custom_dataset_reads(tmp_path):
    import pandas as pd

    prompts = ['Say "hi"', "Fix:\ndef f(:\n    pass", "Café ünïcode"]
    path = wf.write_custom_dataset(prompts, tmp_path / "out" / "dataset.jsonl")
    # CustomDataset.load_data: pd.read_json(lines=True) and a required 'prompt' column.
    frame = pd.read_json(path_or_buf=str(path), lines=True)
    assert list(frame.columns) == ["prompt"] and frame["prompt"].tolist() == prompts
    source = VLLM_DATASETS.read_text()
    assert 'if "prompt" not in jsonl_data.columns:' in source and 'self.dataset_path.endswith(".jsonl")' in source
    workload = wf.prepare_workload(prompts, max_model_len=2048)
    assert wf.write_custom_dataset(workload, tmp_path / "again.jsonl").read_text() == path.read_text()


def test_write_rejects_what_vllm_would():
    with pytest.raises(ValueError, match=r"must be a \.jsonl file"):
        wf.write_custom_dataset(["a"], "dataset.json")
    with pytest.raises(ValueError, match="no prompts"):
        wf.write_custom_dataset([], "dataset.jsonl")
