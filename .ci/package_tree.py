"""Lay the package out as one folder tree of links, for the tools that find modules by folder.

pyproject.toml maps top-level folders (parsers/, analysis/, ...) into `npuscope.*`. Python
follows that mapping; import-linter (grimp) and mypy do not: they walk the folder of
`npuscope` and would see only npuscope/. This writes DEST/npuscope/ with a link to every module
of npuscope/ and one to each mapped folder, so both see the package as it is installed.

    python .ci/package_tree.py build/lint-tree
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def build(dest: Path) -> Path:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = dest / "npuscope"
    if top.exists():
        shutil.rmtree(top)
    top.mkdir(parents=True)
    for module in sorted((ROOT / mapping["npuscope"]).glob("*.py")):
        (top / module.name).symlink_to(module)
    for package, folder in mapping.items():
        if package != "npuscope":
            (top / package.removeprefix("npuscope.").replace(".", "/")).symlink_to(ROOT / folder)
    return top


if __name__ == "__main__":
    build(Path(sys.argv[1]).resolve())
