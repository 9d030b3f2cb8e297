"""Recording a run a command read or fetched in the runs registry (analysis/run_registry.py):
a problem is a note on stderr, never a failed command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npuscope.analysis.headline import Headline
    from npuscope.analysis.session import Analysis
    from npuscope.capture.spec import CaptureSpec


def note_run(
    path: str | Path,
    *,
    kind: str,
    analysis: Analysis | None = None,
    figures: Headline | None = None,
    spec: CaptureSpec | None = None,
    capture: str = "",
    change: str | None = None,
) -> None:
    """Record the run at `path`: its headline figures (`figures`, or those of `analysis`), the host,
    command and change of the capture `spec` made it (`change` instead of the spec's)."""
    from npuscope.analysis import run_registry
    from npuscope.analysis.headline import headline

    host = command = made = ""
    if spec is not None:
        from npuscope.capture.run_record import change_text

        host, command, made = ",".join(spec.all_hosts()), " ".join(spec.command), change_text(spec)
    problem = run_registry.record_run(
        path,
        kind=kind,
        headline=headline(analysis) if analysis is not None else figures,
        host=host,
        command=command,
        change=made if change is None else change,
        capture=capture,
    )
    if problem:
        print(f"npuscope: note: {problem}", file=sys.stderr)
