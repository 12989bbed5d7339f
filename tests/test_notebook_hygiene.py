"""The workshop notebooks read like lessons and stay light (STYLE.md, "The notebook and app layer").

Convention: the first code cell of every notebook is its one parameters cell; it starts with the
line ``# Parameters`` (and carries the ``parameters`` tag, as papermill expects). nbval runs the
notebooks themselves; this file checks how they are stored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Stored outputs carry a palette PNG of every chart (10-35 KB each): a lesson of about ten charts
#: stays under this, against about 1 MB for one stored with its widget state.
MAX_BYTES = 300_000
PARAMETERS = "# Parameters"
#: A markdown link to a notebook by relative path: ``[05-fragmentation](05-fragmentation.ipynb)``.
NOTEBOOK_LINK = re.compile(r"\]\(((?:notebooks/)?[\w.-]+\.ipynb)\)")


def code_cells(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def markdown(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join(source(c) for c in cells if c["cell_type"] == "markdown")


def is_parameters(cell: dict) -> bool:
    return source(cell).startswith(PARAMETERS) or "parameters" in cell.get("metadata", {}).get(
        "tags", []
    )


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_function_definitions_in_code_cells(path):
    for cell in code_cells(path):
        found = re.search(r"^\s*(async\s+)?def |^\s*class ", source(cell), re.MULTILINE)
        assert not found, (
            f"{path.name}: logic belongs in impactlab.notebook.lessons, not in a cell:\n{source(cell)}"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exactly_one_parameters_cell_and_it_comes_first(path):
    cells = code_cells(path)
    marked = [i for i, c in enumerate(cells) if is_parameters(c)]
    assert marked == [0], (
        f"{path.name}: parameters cells at code cells {marked}; want exactly the first"
    )
    assert source(cells[0]).startswith(PARAMETERS) and "parameters" in cells[0]["metadata"].get(
        "tags", []
    )
    assert 'os.environ.get("IMPACTLAB_FAST")' in source(cells[0]), f"{path.name}: no fast mode"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_stored_chart_has_a_picture_and_a_readable_title(path):
    """What JupyterLab shows an untrusted notebook before it runs, and GitHub and nbviewer show."""
    for cell in code_cells(path):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            # (any widget: without a live kernel one draws as its placeholder line; a finished
            # progress bar is stored as its text line instead, see ``runs.sweep._bar``)
            if "application/vnd.jupyter.widget-view+json" in data:
                assert data.get("image/png"), f"{path.name}: a widget stored without a picture"
                assert "object at 0x" not in data["text/plain"], (
                    f"{path.name}: {data['text/plain']}"
                )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_small_and_stored_without_widget_state(path):
    assert path.stat().st_size < MAX_BYTES, f"{path.name}: {path.stat().st_size} bytes"
    metadata = json.loads(path.read_text())["metadata"]
    assert "widgets" not in metadata, (
        f"{path.name}: store with --NotebookClient.store_widget_state=False"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom(path):
    counts = [c.get("execution_count") for c in code_cells(path)]
    assert all(isinstance(n, int) for n in counts), f"{path.name}: unexecuted code cells: {counts}"
    assert counts == sorted(counts), f"{path.name}: cells run out of order: {counts}"
    errors = [
        o for c in code_cells(path) for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors, f"{path.name}: stored with an error: {errors[0].get('ename')}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_starts_with_a_title_and_has_checked_numbers(path):
    cells = json.loads(path.read_text())["cells"]
    assert cells[0]["cell_type"] == "markdown" and source(cells[0]).startswith("# ")
    if path.name.startswith("01-"):  # the Explorer app: widgets only
        return
    checked = [c for c in code_cells(path) if source(c).startswith("# NBVAL_CHECK_OUTPUT")]
    assert checked, f"{path.name}: no cell marked # NBVAL_CHECK_OUTPUT"
    assert all(c.get("outputs") for c in checked), (
        f"{path.name}: a checked cell has no stored output"
    )


def test_start_here_and_the_readme_list_every_lesson():
    """00's table of lessons and the README's link every notebook, and nothing else."""
    names = {p.name for p in NOTEBOOKS}
    start = NOTEBOOK_LINK.findall(markdown(ROOT / "notebooks/00-start-here.ipynb"))
    assert set(start) == names, f"00-start-here links {sorted(start)}, the lessons: {sorted(names)}"
    readme = NOTEBOOK_LINK.findall((ROOT / "README.md").read_text())
    assert {t.removeprefix("notebooks/") for t in readme} == names, sorted(readme)
    assert all(t.startswith("notebooks/") for t in readme), sorted(readme)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_links_to_other_notebooks_resolve(path):
    for target in NOTEBOOK_LINK.findall(markdown(path)):
        assert (path.parent / target).is_file(), f"{path.name} links {target}, which does not exist"
