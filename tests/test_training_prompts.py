import json
import sys
from pathlib import Path

import pytest

from helpers.training_prompts import training_prompts

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def suite_prompts() -> set[str]:
    rows = [json.loads(line) for line in (ROOT / "data" / "prompts" / "suite.jsonl").read_text().splitlines()]
    return {r["prompt"] for r in rows}


def test_the_sets_are_disjoint_from_each_other_and_from_the_suite():
    base, extra = ({p for _, p in training_prompts(1, s)} for s in ("base", "extra"))
    assert base and extra and not base & extra
    assert not (base | extra) & suite_prompts()
    assert {c for c, _ in training_prompts(1, "extra")} == {"structured", "creative"}


def test_rows_are_read_by_set(tmp_path, monkeypatch):
    import train_drafts

    path = tmp_path / "completions.jsonl"
    rows = [{"prompt": "a"}, {"prompt": "b", "set": "base"}, {"prompt": "c", "set": "extra"}]  # no "set": base
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(train_drafts, "COMPLETIONS", path)
    assert [r["prompt"] for r in train_drafts.load_rows()] == ["a", "b"]
    assert [r["prompt"] for r in train_drafts.load_rows(("base", "extra"))] == ["a", "b", "c"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    with pytest.raises(SystemExit, match="extra"):
        train_drafts.load_rows(("base", "extra"))
