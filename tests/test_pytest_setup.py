"""The test command itself: a notebook's cells share one kernel whatever pytest and xdist are
installed, and a notebook can be tested alone (``python -m pytest notebooks/NAME.ipynb``).

Each test runs pytest in a subprocess, in a scratch folder holding the project's own
``pyproject.toml``, nbval sanitizer and ``notebooks/conftest.py`` and a small notebook whose
later cells need the earlier ones' kernel. No ``tests/conftest.py`` is there: nothing may
depend on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Enough cells that any scheduler that spreads them over two workers does.
CELLS = 12


def chained_notebook() -> nbformat.NotebookNode:
    """Cell 0 records its process; every later cell needs cell 0's variables (a NameError in a
    fresh kernel) and checks it runs in the same process, in fast mode."""
    first = "import os\nSTART_PID = os.getpid()\nSEEN = []"
    later = (
        "SEEN.append({k})\nassert os.getpid() == START_PID\n"
        "assert os.environ.get('IMPACTLAB_FAST') == '1', 'notebooks run in fast mode under pytest'"
    )
    cells = [nbformat.v4.new_code_cell(first)]
    cells += [nbformat.v4.new_code_cell(later.format(k=k)) for k in range(1, CELLS)]
    return nbformat.v4.new_notebook(cells=cells)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch copy of the test configuration, with one chained notebook in notebooks/."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", tmp_path / "tests")
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "conftest.py", tmp_path / "notebooks")
    nbformat.write(chained_notebook(), tmp_path / "notebooks" / "chained.ipynb")
    return tmp_path


def run_pytest(
    folder: Path, *args: str, fast: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("IMPACTLAB_FAST", "PYTEST_ADDOPTS")}
    if fast is not None:
        env["IMPACTLAB_FAST"] = fast
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_notebook_alone_runs_every_cell_in_one_kernel_on_two_workers(project):
    done = run_pytest(project, "-n", "2", "notebooks/chained.ipynb")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{CELLS} passed" in done.stdout


def test_the_check_fails_when_cells_are_spread_over_workers(project):
    """The same notebook under a scheduler that spreads single tests (``--dist load``) fails:
    the test above would catch a configuration that split a notebook."""
    done = run_pytest(project, "-n", "2", "--dist", "load", "notebooks/chained.ipynb")
    assert done.returncode != 0
    assert "NameError" in done.stdout or "AssertionError" in done.stdout


def checked_notebook(stored: str) -> nbformat.NotebookNode:
    """One checked cell that prints the size it ran at; ``stored`` is its stored output."""
    cell = nbformat.v4.new_code_cell(
        "# NBVAL_CHECK_OUTPUT\nimport os\nprint('fast' if os.environ.get('IMPACTLAB_FAST') == '1' else 'full')",
        execution_count=1,
        outputs=[nbformat.v4.new_output("stream", name="stdout", text=stored)],
    )
    return nbformat.v4.new_notebook(cells=[cell])


def test_stored_outputs_are_compared_at_full_size_only(project):
    """Stored outputs come from the notebook as shipped (full size); the fast default run checks
    that every cell runs, the full-size run that the checked outputs still hold."""
    path = project / "notebooks" / "checked.ipynb"
    nbformat.write(checked_notebook("full\n"), path)
    assert (
        run_pytest(project, "-n", "0", "notebooks/checked.ipynb").returncode == 0
    )  # fast: not compared
    assert run_pytest(project, "-n", "0", "notebooks/checked.ipynb", fast="0").returncode == 0
    nbformat.write(checked_notebook("something else\n"), path)
    failed = run_pytest(project, "-n", "0", "notebooks/checked.ipynb", fast="0")
    assert failed.returncode != 0 and "something else" in failed.stdout


@pytest.mark.thorough
def test_the_notebooks_folder_runs_alone(project):
    done = run_pytest(project, "-n", "2", "notebooks")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


@pytest.mark.thorough
def test_a_shipped_notebook_passes_alone():
    """``python -m pytest notebooks/00-start-here.ipynb`` from the repository, as a teacher who
    edited one notebook would check it."""
    done = run_pytest(ROOT, "notebooks/00-start-here.ipynb")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
