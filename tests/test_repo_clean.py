"""Using the Explorer writes nothing into the repository: a workshop full of people clicking
must not leave result files, caches or uploads in anybody's checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Caches of Python and the test tools, written by the test run itself, not by the app.
TOOL_CACHES = ("__pycache__/", ".pytest_cache/", ".hypothesis/", ".benchmarks/", ".ruff_cache/")


def git_status() -> list[str]:
    """``git status --porcelain`` lines of the checkout, untracked and *ignored* files included
    (results written as Parquet would be ignored by .gitignore, yet still be litter)."""
    cmd = ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if not any(c in line for c in TOOL_CACHES)]


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_explorer_runs_leave_the_repository_clean(monkeypatch):
    from impactlab import charts
    from impactlab.widgets import Explorer

    monkeypatch.chdir(ROOT / "notebooks")  # where a Jupyter or Voila kernel starts
    before = git_status()
    charts.enable_offline()
    app = Explorer.from_query("gpus=64&policy=legacy")
    app.policy_b.value = "impactful"
    app.compare_box.value = True
    app.run()
    assert len(app.results) == 2
    assert git_status() == before
