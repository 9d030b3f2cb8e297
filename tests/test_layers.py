"""The parsing layer (and every other headless layer) never imports Textual or Rich."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import npuscope.analysis
import npuscope.capture
import npuscope.parsers

# Every module of the headless layers, and the commands that run without the explorer.
HEADLESS = [
    *(m.name for m in pkgutil.iter_modules(npuscope.parsers.__path__, "npuscope.parsers.")),
    *(m.name for m in pkgutil.iter_modules(npuscope.analysis.__path__, "npuscope.analysis.")),
    *(m.name for m in pkgutil.iter_modules(npuscope.capture.__path__, "npuscope.capture.")),
    "npuscope.cli",
    "npuscope.inspect_cmd",
    "npuscope.report_cmd",
    "npuscope.compare_cmd",
    "npuscope.capture_cmd",
    "npuscope.arguments",
    "npuscope.loading",
    "npuscope.fixtures.generate",
]

# One fresh interpreter imports the modules one after the other and notes, after each, whether
# Textual or Rich is loaded. Every module imported before a module M left them out, so they are
# there after M exactly when M's own imports pull them in: the first module named is the culprit
# (the ones after it are named too, as they find them already loaded).
PROBE = """
import importlib, json, sys
seen = {}
for module in json.loads(sys.argv[1]):
    importlib.import_module(module)
    seen[module] = sorted(m for m in ('textual', 'rich') if m in sys.modules)
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def pulled_in() -> dict[str, list[str]]:
    res = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEADLESS)], capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout)


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_module_imports_no_ui(module, pulled_in):
    assert module in pulled_in, f"{module} was not imported"
    assert pulled_in[module] == [], f"{module} pulled in: {' '.join(pulled_in[module])}"
