"""The framework a capture tells, which picks the words of the advice (analysis/advice.py)."""

from __future__ import annotations

from typing import Literal, get_args

from npuscope.parsers import Profile

from .task_kinds import has_custom_kernel

Framework = Literal["paddle", "torch_npu", "mindspore", "acl", "unknown"]
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)

MSPROF_LAYOUTS = ("era_a", "era_b", "file")
"""Layouts of a plain msprof export: anything run under `msprof --application` writes them."""


def framework_of(layout: str, profile: Profile | None = None) -> Framework:
    """The framework a capture tells. By its layout: torch_npu (`*_ascend_pt`), MindSpore
    (`*_ascend_ms`) and Paddle's own traces. A plain msprof export (`profile` given) tells by
    what it holds: with an application's own kernel (`custom_kernel`: frameworks launch CANN
    operators) it is a plain ACL application; otherwise it could be Paddle, torch_npu or an
    ACL application calling CANN operators (nothing in the export tells them apart; the
    folder name `ascend_profiling/` is Paddle's default but any run may use it), so unknown.
    A scan of the tasks for msprof layouts: call it once per diagnosis."""
    known: dict[str, Framework] = {"torch_npu": "torch_npu", "mindspore": "mindspore", "paddle": "paddle"}
    if layout in known or profile is None or layout not in MSPROF_LAYOUTS:
        return known.get(layout, "unknown")
    return "acl" if has_custom_kernel(profile.tasks) else "unknown"
