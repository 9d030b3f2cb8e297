"""The parsing layer (and every other headless layer) never imports Textual or Rich."""

from __future__ import annotations

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
    "npuscope.cli", "npuscope.inspect_cmd", "npuscope.report_cmd", "npuscope.compare_cmd",
    "npuscope.capture_cmd", "npuscope.arguments", "npuscope.loading",
    "npuscope.fixtures.generate",
]


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_module_imports_no_ui(module):
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(' '.join(sorted(m for m in ('textual', 'rich') if m in sys.modules)))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "", f"{module} pulled in: {res.stdout.strip()}"
