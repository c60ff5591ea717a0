"""docs/measurements.md is what scripts/write_measurements_doc.py writes from data/reference/, and the README stays a
short, self-explaining entry point: at most 12,000 characters, a working table of contents, no project-internal
words."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Words a reader outside the project cannot know. Technical uses (pytest's scope="session") do not match these.
BANNED = [r"(?i)this session", r"(?i)the session's", r"FACTS", r"(?i)\bissue \d"]


def _generator():
    spec = importlib.util.spec_from_file_location("write_measurements_doc", ROOT / "scripts" / "write_measurements_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not - and _), spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"(?m)^#{1,6} (.+)$", markdown)}


def test_measurements_doc_is_not_stale():
    reason = _generator().stale_reason()
    assert reason is None, reason


def test_measurements_doc_covers_every_reference_csv():
    text = (ROOT / "docs" / "measurements.md").read_text()
    for csv in sorted((ROOT / "data" / "reference").rglob("*.csv")):
        assert f"`{csv.name}`" in text or f"`{csv.relative_to(ROOT).as_posix()}`" in text, csv


def test_readme_is_short():
    text = README.read_text()
    assert len(text) <= 12_000, f"README.md has {len(text)} characters; move detail to docs/measurements.md"


def test_readme_has_a_table_of_contents_linking_to_its_sections():
    text = README.read_text()
    sections = re.findall(r"(?m)^## (.+)$", text)
    contents = re.search(r"(?ms)^## Contents\n(.*?)^## ", text)
    assert contents, "README.md needs a '## Contents' section before the others"
    links = re.findall(r"\]\(#([^)]+)\)", contents.group(1))
    expected = [_slug(s) for s in sections if s != "Contents"]
    assert links == expected, f"contents link {links}, sections are {expected}"


def test_readme_links_into_docs_resolve():
    text = README.read_text()
    anchors = _anchors((ROOT / "docs" / "measurements.md").read_text())
    for anchor in re.findall(r"\]\(docs/measurements\.md#([^)]+)\)", text):
        assert anchor in anchors, f"README links to docs/measurements.md#{anchor}, which has no such heading"


@pytest.mark.parametrize("path", ["README.md", "docs/measurements.md"])
def test_no_project_internal_words(path):
    text = (ROOT / path).read_text()
    found = [m.group(0) for pattern in BANNED for m in re.finditer(pattern, text)]
    assert not found, f"{path} uses words a reader outside the project cannot know: {found}"
