"""The colours of wait causes: one palette for the tables' Cause column and the mini timeline.

Host compile calls on the timeline share the red of recompilation, host sync calls the
orange of host-op waits and waits inside a collective the blue of the communication lane, so
a wait, its cause in the table and what lies behind it all read as the same colour. Rich style strings; the timeline parses them once.
"""

from __future__ import annotations

CAUSE_STYLES: dict[str, str] = {
    "recompilation": "bold red1",
    "host_op": "orange1",
    "communication": "dodger_blue2",
    "unexplained": "grey70",
    "expected": "grey35",
}
HOST_COMPILE_STYLE = "red3"
HOST_SYNC_STYLE = "dark_orange"

# The parts of a step in the Steps tab's stacked bars; compute and communication in the
# colours of their timeline lanes, free time in the grey of idle.
STEP_PART_STYLES: dict[str, str] = {
    "compute": "green3",
    "comm": "dodger_blue2",
    "free": "grey50",
}
STEP_PART_LABELS: dict[str, str] = {"compute": "compute", "comm": "comm not overlapped", "free": "free"}
