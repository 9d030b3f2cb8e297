"""How many cores each card has: what a task's Block Dim is measured against.

Read from what the capture holds, best first:

1. `device_N/info.json.N` of the raw `PROF_*` folder (msprof writes it in every capture;
   torch_npu keeps the raw `PROF_*` inside `*_ascend_pt/`): `DeviceInfo[].ai_core_num`
   (cube cores, the AI cores) and `aiv_num` (vector cores), exact for the chip that ran.
2. The chip name alone (`NPU_INFO` of a db export, `platform_version` of an info.json without
   counts): the counts of that chip in `CHIP_CORES`, an assumption the findings must say.

Nothing here raises: a capture without any of them has unknown counts (`None`), and a rule
that needs them does not run. Nothing is kept between calls: parsers/capture_extras.py reads
them once per diagnosis and the value goes with it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .db_snapshot import committed_uri
from .errors import ProfileError
from .layout import Capture

if TYPE_CHECKING:
    pass

INFO_RE = re.compile(r"^info\.json\.(\d+)$")
_MAX_INFO_BYTES = 1 << 20  # an info.json is a few hundred bytes; a larger one is not it

# AI cores (cube) and vector cores per chip, from Huawei's product pages and the info.json of
# real captures. A family name without its model number ("Ascend910B", as NPU_INFO of real
# db exports says) gets the smallest member's counts: a Block Dim is then never judged
# against more cores than the chip may have.
CHIP_CORES: dict[str, tuple[int, int]] = {
    "Ascend910B1": (24, 48),
    "Ascend910B2": (24, 48),
    "Ascend910B2C": (24, 48),
    "Ascend910B3": (20, 40),
    "Ascend910B4": (20, 40),
    "Ascend910B": (20, 40),
    "Ascend910_93": (24, 48),
}


@dataclass(frozen=True)
class DeviceInfo:
    """One card's core counts and where they come from."""

    chip: str | None
    ai_core_num: int | None  # cube cores (AI_CORE, MIX_AIC tasks)
    aiv_num: int | None  # vector cores (AI_VECTOR_CORE, MIX_AIV tasks); None: not separate
    source: str  # "info.json.0", or "chip name Ascend910B (NPU_INFO)"
    assumed: bool  # counts taken from the chip name, not read from the capture

    @property
    def known(self) -> bool:
        return bool(self.ai_core_num)

    def describe(self) -> str:
        """`20 AI cores, 40 vector cores (info.json.0)`, saying when the counts are assumed."""
        counts = f"{self.ai_core_num} AI cores" + (f", {self.aiv_num} vector cores" if self.aiv_num else "")
        if self.assumed:
            return f"{counts}, assumed from the chip name {self.chip}"
        return f"{counts} ({self.source})"


def chip_counts(chip: str | None) -> tuple[int, int] | None:
    """The (AI cores, vector cores) of a chip name, exact or by its family; None if unknown."""
    if not chip:
        return None
    if chip in CHIP_CORES:
        return CHIP_CORES[chip]
    for name in sorted(CHIP_CORES, key=len, reverse=True):
        if chip.startswith(name):
            return CHIP_CORES[name]
    return None


def _from_chip(chip: str | None, where: str) -> DeviceInfo | None:
    counts = chip_counts(chip)
    if counts is None:
        return None
    return DeviceInfo(chip, counts[0], counts[1], f"chip name {chip} ({where})", True)


def _int(value: object) -> int | None:
    try:
        n = int(str(value))
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def read_info_json(path: Path) -> DeviceInfo | None:
    """The counts of one `info.json.N`, or None when it is unreadable or says nothing."""
    try:
        if path.stat().st_size > _MAX_INFO_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    chip = doc.get("platform_version")
    chip = chip if isinstance(chip, str) and chip else None
    devices = doc.get("DeviceInfo")
    first = devices[0] if isinstance(devices, list) and devices and isinstance(devices[0], dict) else {}
    aic = _int(first.get("ai_core_num"))
    if aic:
        return DeviceInfo(chip, aic, _int(first.get("aiv_num")), path.name, False)
    return _from_chip(chip, path.name)


def _info_files(folder: Path, nested: bool) -> dict[str, Path]:
    """device number -> info.json.N below `folder`: device_N/, and PROF_*/device_N/ if `nested`."""
    found: dict[str, Path] = {}
    for pattern in ("device_*/info.json.*", "PROF_*/device_*/info.json.*")[: 2 if nested else 1]:
        try:
            paths = sorted(folder.glob(pattern))
        except OSError:
            continue
        for p in paths:
            m = INFO_RE.match(p.name)
            if m and m.group(1) not in found:
                found[m.group(1)] = p
    return found


def _npu_info(db: Path) -> dict[str, str]:
    """device id -> chip name of a db export's NPU_INFO; empty when it has none."""
    # The committed state (a -wal merged, a hot journal rolled back in a private copy), opened
    # immutable: nothing is written beside the user's file.
    try:
        with committed_uri(db) as uri:
            con = sqlite3.connect(uri, uri=True)
            try:
                rows = con.execute("SELECT id, name FROM NPU_INFO").fetchall()
            finally:
                con.close()
    except (sqlite3.Error, OSError, ValueError, ProfileError):
        return {}
    return {str(i): str(n) for i, n in rows if n}


def _folders(paths: tuple[Path, ...], levels: int) -> list[tuple[Path, int]]:
    """(folder, how far up) of `paths` and `levels` parents of each, nearest first, once each."""
    out: list[tuple[Path, int]] = []
    seen: set[Path] = set()
    for p in paths:
        folder = p.parent
        for up in range(levels + 1):
            if folder not in seen:
                seen.add(folder)
                out.append((folder, up))
            if folder.parent == folder:
                break
            folder = folder.parent
    return sorted(out, key=lambda fu: fu[1])


def device_info(capture: Capture, cards: tuple[str, ...]) -> dict[str, DeviceInfo]:
    """The core counts of each card of `capture` that the capture tells (others are absent)."""
    out: dict[str, DeviceInfo] = {}
    for src in capture.sources:
        files = src.files
        # A source of one card (Era A device_N, a torch_npu rank) reads the info.json beside its
        # own files; a merged source (Era B, a merged db) maps device numbers to cards. Era A's
        # files are two folders below PROF_*; Era B's and torch_npu's (whose raw PROF_* sits in
        # the *_ascend_pt folder) one below the folder holding device_N or PROF_*.
        folders = _folders(files, 2) if files else [(capture.path, 0)]
        if all(f != capture.path for f, _ in folders):
            folders.append((capture.path, 0))
        infos: dict[str, Path] = {}
        for folder, up in folders:
            for dev, path in _info_files(folder, nested=up <= 1).items():
                infos.setdefault(dev, path)
        chips = _npu_info(src.db) if src.db is not None else {}
        if src.card is not None:
            read = [read_info_json(p) for p in ([infos[src.card]] if src.card in infos else infos.values())]
            hit = next((r for r in read if r is not None and not r.assumed), None)
            hit = hit or next((r for r in read if r is not None), None)
            if hit is None and chips:
                hit = _from_chip(chips.get(src.card) or next(iter(chips.values())), "NPU_INFO")
            if hit is not None:
                out.setdefault(src.card, hit)
            continue
        for card in cards:
            info = read_info_json(infos[card]) if card in infos else None
            if info is None and card in chips:
                info = _from_chip(chips[card], "NPU_INFO")
            if info is not None:
                out.setdefault(card, info)
    return out
