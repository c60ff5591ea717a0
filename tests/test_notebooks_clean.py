"""Committed notebooks carry no outputs and follow the kit's chapter shape: a title, an overview, prerequisites,
a summary, and code cells of at most 20 lines."""

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_stripped(path):
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"{path.name} cell {index} has committed outputs: run nbstripout"
            assert cell.execution_count is None, f"{path.name} cell {index} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_shape(path):
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    for heading in ("**Overview**", "**Prerequisites**", "## Summary"):
        assert heading in text, f"{path.name} lacks {heading}"
    long = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and len(c.source.splitlines()) > 20]
    assert not long, f"{path.name}: code cells {long} are over 20 lines; move the logic to helpers/"
