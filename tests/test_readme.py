"""The README's code runs as written: the Python surface example and the dozen-line policy."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import impactlab as il
from impactlab.base.registry import register_policy

README = (Path(__file__).parent.parent / "README.md").read_text()


def python_blocks() -> list[str]:
    """The README's ```python blocks."""
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_the_custom_policy_in_the_readme_runs_and_is_short():
    block = next(b for b in python_blocks() if "class ShortestFirst" in b)
    assert len([line for line in block.splitlines() if line.strip()]) <= 16
    module = types.ModuleType("readme_policy")  # dataclasses look their module up
    sys.modules[module.__name__] = module
    try:
        exec(compile(block, "README.md", "exec"), module.__dict__)
        result = il.simulate(
            il.SimConfig(policy="shortest", gpus=16, days=1.0, policy_knobs={"scan": 20})
        )
        assert result.summary()["jobs"] > 0 and (result.events["event"] == "finish").any()
    finally:
        register_policy("shortest", "plugin_policy:ShortestFirst")  # as conftest left it
        del sys.modules[module.__name__]


def test_the_surface_example_names_only_what_exists():
    block = next(b for b in python_blocks() if "il.compare(config" in b)
    for name in re.findall(r"il\.(\w+)", block):
        assert hasattr(il, name), name
    for key in re.findall(r'metrics\(\)\["([^"]+)"\]', block):
        assert key in il.simulate(il.SimConfig(gpus=16, days=1.0)).metrics(), key
