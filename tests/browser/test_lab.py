"""The notebooks in JupyterLab, in a real browser: open, Run All, no error output, charts drawn,
and nothing written into the repository (autosave is off in the test server's settings)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ("00-start-here.ipynb", "01-explorer.ipynb")
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
#: Every code cell shows an execution count ("[3]:"), none is queued or running ("[*]:").
ALL_EXECUTED = """() => {
    const prompts = Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt'));
    return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p.innerText.trim()));
}"""
STDERR = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
CHART_MARKS = ".jp-OutputArea-output .vega-embed .marks"


def git_status() -> str:
    """``git status --porcelain`` of the checkout (untracked files included)."""
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def menu(page, top: str, item: str) -> None:
    """Click a JupyterLab menu entry, e.g. ``menu(page, "Run", "Run All Cells")``."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(page, lab, shot, name):
    base, token = lab
    if not (ROOT / "notebooks" / name).exists():
        pytest.skip(f"notebooks/{name} is not in this checkout yet")
    before = git_status()
    page.goto(f"{base}/lab/tree/notebooks/{name}?token={token}")
    page.wait_for_selector(IDLE)
    page.keyboard.press("Escape")  # the first-start "news" toast would cover the notebook
    shot(page, "opened")
    # Stored notebooks carry execution counts: clear them so "all cells numbered" means this run.
    menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function(f"() => !({ALL_EXECUTED})()")
    menu(page, "Run", "Run All Cells")
    page.wait_for_function(ALL_EXECUTED, timeout=150_000)
    page.wait_for_selector(IDLE)
    page.wait_for_selector(CHART_MARKS)
    shot(page, "ran")
    errors = [t for t in page.locator(STDERR).all_inner_texts() if "Traceback" in t or "Error" in t]
    assert errors == [], f"{name} wrote errors:\n" + "\n".join(errors)
    assert "Error displaying widget" not in page.inner_text(".jp-NotebookPanel:not(.lm-mod-hidden)")
    assert page.problems == []
    assert git_status() == before, "running the notebook in JupyterLab changed the repository"
