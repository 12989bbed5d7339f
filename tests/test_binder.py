"""The Binder image (binder/) builds what the notebooks and the Explorer need, and nothing else:
exact pins, every runtime dependency covered, every notebook import provided, no test tools."""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import re
import sys
import tomllib
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Test tools never belong in the image, whether or not the test extra lists them.
TEST_ONLY = {"pytest", "playwright", "nbval", "hypothesis", "pytest-xdist", "pytest-playwright"}


def pyproject() -> dict:
    """The parsed pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def requirement_lines() -> list[str]:
    """The requirement lines of binder/requirements.txt, without comments and blank lines."""
    lines = (
        line.split("#", 1)[0].strip()
        for line in (BINDER / "requirements.txt").read_text().splitlines()
    )
    return [line for line in lines if line]


def pins() -> dict[str, Version]:
    """binder/requirements.txt as {canonical name: pinned version}."""
    out = {}
    for line in requirement_lines():
        req = Requirement(line)
        (spec,) = req.specifier
        out[canonicalize_name(req.name)] = Version(spec.version)
    return out


@cache
def import_names() -> dict[str, list[str]]:
    """{top-level import name: distributions that provide it} for this environment."""
    return md.packages_distributions()


@cache
def provided_distributions() -> frozenset[str]:
    """The pinned distributions and everything they require (installed here, extras excluded)."""
    seen: set[str] = set()
    todo = list(pins())
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:  # not installed here: its own pin is all we know
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return frozenset(seen)


def notebook_imports(path: Path) -> set[str]:
    """Top-level module names imported by the code cells of a notebook (magics turned into Python)."""
    transform = TransformerManager().transform_cell
    names: set[str] = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse(transform("".join(cell["source"])))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_line_is_an_exact_pin():
    for line in requirement_lines():
        assert not line.startswith(("-e", ".", "-r", "git+")), (
            f"local or nested reference: {line!r}"
        )
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"not name==version: {line!r}"
        assert not req.extras and req.marker is None and req.url is None, (
            f"not a plain pin: {line!r}"
        )


def test_every_runtime_dependency_is_satisfied_by_a_pin():
    pinned = pins()
    for line in pyproject()["project"]["dependencies"]:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in pinned, (
            f"{req.name} is a runtime dependency but binder/requirements.txt does not pin it"
        )
        assert req.specifier.contains(pinned[name], prereleases=True), (
            f"{name}=={pinned[name]} violates {line!r}"
        )


def test_jsonschema_is_pinned_below_its_slow_format_extra():
    # From 4.25 on, jsonschema's format-nongpl extra (which jupyter-events installs) brings
    # rfc3987-syntax, which builds a grammar whenever altair imports jsonschema: about 3 s more
    # for every kernel, so every Binder page of the Explorer (README, "Run a workshop").
    assert pins()["jsonschema"] < Version("4.25")


def test_postbuild_bundles_the_offline_charts_into_the_image():
    # Each kernel then reads the bundle back instead of having vl-convert make it (about 1.2 s).
    assert "charts.enable_offline()" in (BINDER / "postBuild").read_text()


def test_voila_is_pinned_for_the_explorer_link():
    assert "voila" in pins()


def test_no_test_tool_is_pinned():
    extra = {
        canonicalize_name(Requirement(r).name)
        for r in pyproject()["project"]["optional-dependencies"].get("test", [])
    }
    leaked = (extra | TEST_ONLY) & set(pins())
    assert not leaked, f"test-only packages in the Binder image: {sorted(leaked)}"


def test_runtime_is_python_312_and_the_package_accepts_it():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.12"
    assert "3.12" in (Requirement("python" + pyproject()["project"]["requires-python"]).specifier)


def test_postbuild_is_strict_and_installs_without_dependencies():
    post = BINDER / "postBuild"
    lines = [line.strip() for line in post.read_text().splitlines()]
    code = [line for line in lines if line and not line.startswith("#")]
    assert lines[0] in ("#!/bin/bash", "#!/usr/bin/env bash")
    assert code[0] == "set -euo pipefail", "postBuild must stop at the first failure"
    installs = [line for line in code if "pip install" in line]
    assert installs and all("--no-deps" in line for line in installs), (
        "install the package with --no-deps"
    )
    assert post.stat().st_mode & 0o111, "postBuild must be executable"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_imports_are_in_the_image(notebook: Path):
    provided = provided_distributions()
    missing = {}
    for name in sorted(notebook_imports(notebook) - set(sys.stdlib_module_names) - {"impactlab"}):
        dists = {canonicalize_name(d) for d in import_names().get(name, [])}
        if not dists & provided:
            missing[name] = sorted(dists) or "not installed here"
    assert not missing, (
        f"{notebook.name} imports modules no pinned distribution provides: {missing}"
    )


def test_notebook_imports_reads_magics_and_skips_relative_imports(tmp_path: Path):
    cells = [
        "%matplotlib inline\nimport os.path, numpy as np\n",
        "from altair import Chart\nfrom . import x\n",
        "!ls\nimport impactlab.widgets",
    ]
    nb = {
        "cells": [{"cell_type": "code", "source": [c]} for c in cells]
        + [{"cell_type": "markdown", "source": ["import no"]}]
    }
    (tmp_path / "x.ipynb").write_text(json.dumps(nb))
    assert notebook_imports(tmp_path / "x.ipynb") == {"os", "numpy", "altair", "impactlab"}


def binder_links() -> list[str]:
    """The mybinder.org launch links in README.md."""
    return re.findall(r"https://mybinder\.org/v2/gh/[^\s)\"'>`]+", (ROOT / "README.md").read_text())


def assert_explorer_accepts(preset: str) -> None:
    """The Explorer takes ``preset`` without a message (all keys declared, all values valid)."""
    from impactlab.widgets import Explorer

    app = Explorer.from_query(preset, run=False)
    assert not app.message.value, f"preset {preset!r} is refused: {app.message.value}"


def test_readme_launches_the_start_notebook_in_lab_and_the_explorer_in_voila():
    targets = set()
    for link in binder_links():
        query = parse_qs(urlsplit(link).query)
        if not query:  # a plain launch (or a pre-build link): opens the default UI
            continue
        # Binder's own query has only urlpath: the inner "?" and "&" of a preset must be
        # percent-encoded (%3F, %26), or Binder would take them for its own parameters.
        assert set(query) == {"urlpath"}, (
            f"{link}: encode the inner query (quote(urlpath, safe=''))"
        )
        inner = urlsplit(query["urlpath"][0])
        kind, _, path = inner.path.lstrip("/").partition("/")
        route, _, path = path.partition("/")
        assert (kind, route) in (("lab", "tree"), ("voila", "render")), link
        assert (ROOT / path).is_file(), f"{link}: {path} is not in the repository"
        if inner.query:
            assert_explorer_accepts(inner.query)
        targets.add((kind, path))
    assert ("lab", "notebooks/00-start-here.ipynb") in targets, (
        "README: no Binder link to JupyterLab on 00"
    )
    assert ("voila", "notebooks/01-explorer.ipynb") in targets, (
        "README: no Binder link to the Explorer"
    )
