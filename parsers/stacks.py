"""The user's code behind the framework's operators: torch_npu's `operator_details.csv`.

torch_npu writes it beside kernel_details.csv (ASCEND_PROFILER_OUTPUT) when the profiler ran
with `with_stack=True` (and `record_shapes=True` for the shapes): one row per framework
operator, `Name,Input Shapes,Call Stack,Host Self Duration(us),Host Total Duration(us),
Device Self Duration(us),Device Total Duration(us),...`. A Call Stack is the Python frames,
innermost first, separated by `;` and a line break, each `path(line): function`.

The user's frame of a stack is its first frame outside the framework and the interpreter:
not in site-packages / dist-packages, not in the Python library (`lib/pythonX.Y/`), not in a
`torch`, `torch_npu` or `paddle` source folder, not `<string>`-like. A stack made only of
such frames has none.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .errors import ProfileError
from .layout import Capture
from .training_files import conform, places

STACK_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "op_name": pl.String(),  # the framework operator, `aten::zero_`
    "input_shapes": pl.String(),
    "frame": pl.String(),  # the user's frame, `path:line (function)`; null when none
    "host_self_us": pl.Float64(),
    "host_total_us": pl.Float64(),
    "device_total_us": pl.Float64(),
    "source": pl.String(),
}

FRAMEWORK_FRAME = (
    r"[/\\](?:site-packages|dist-packages)[/\\]"
    r"|[/\\]lib[/\\]python\d+(?:\.\d+)?[/\\]"
    r"|(?:^|[/\\])(?:torch|torch_npu|paddle)[/\\]"
    r"|^<"
)
"""Paths of frames that are not the user's code (see the module docstring)."""

FRAME = r"^(?P<path>.*)\((?P<line>\d+)\):\s*(?P<function>.*)$"

_COLUMNS = {
    "Name": "op_name",
    "Input Shapes": "input_shapes",
    "Call Stack": "stack",
    "Host Self Duration(us)": "host_self_us",
    "Host Total Duration(us)": "host_total_us",
    "Device Total Duration(us)": "device_total_us",
}


def empty_stacks() -> pl.DataFrame:
    return pl.DataFrame(schema=STACK_SCHEMA)


def stack_files(capture: Capture) -> list[tuple[str | None, Path]]:
    """(card, operator_details.csv) of each source of the capture that has one."""
    out = []
    for place in places(capture):
        path = place.file("operator_details", "csv")
        if path is not None:
            out.append((place.card, path))
    return out


def user_frames(stacks: pl.Expr) -> pl.Expr:
    """The user's frame of each Call Stack, `path:line (function)`, or null (vectorised: the
    frames are split, the framework's dropped, the first kept)."""
    frames = stacks.str.split(";").list.eval(
        pl.element()
        .str.strip_chars()
        .filter((pl.element().str.strip_chars() != "") & ~pl.element().str.strip_chars().str.contains(FRAMEWORK_FRAME))
    )
    first = frames.list.first()
    parts = first.str.extract_groups(FRAME)
    return (
        pl.when(parts.struct.field("line").is_not_null())
        .then(
            pl.concat_str(
                parts.struct.field("path").str.strip_chars(),
                pl.lit(":"),
                parts.struct.field("line"),
                pl.lit(" ("),
                parts.struct.field("function").str.strip_chars(),
                pl.lit(")"),
            )
        )
        .otherwise(first)
    )


def read_operator_details(path: Path, card: str) -> pl.DataFrame:
    """One operator_details.csv as STACK_SCHEMA rows; a file without a Call Stack column
    (the profiler ran without with_stack) gives no rows."""
    try:
        raw = pl.read_csv(path, infer_schema=False, encoding="utf8-lossy", truncate_ragged_lines=True)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ProfileError(f"{path}: cannot read operator_details ({str(exc).splitlines()[0]})") from None
    if "Call Stack" not in raw.columns or "Name" not in raw.columns:
        return empty_stacks()
    have = {k: v for k, v in _COLUMNS.items() if k in raw.columns}
    df = raw.select(pl.col(k).alias(v) for k, v in have.items())
    numbers = ("host_self_us", "host_total_us", "device_total_us")
    df = df.with_columns(
        *(
            (
                pl.col(c).str.strip_chars().cast(pl.Float64, strict=False)
                if c in df.columns
                else pl.lit(None, pl.Float64)
            ).alias(c)
            for c in numbers
        ),
        (pl.col("input_shapes") if "input_shapes" in df.columns else pl.lit(None, pl.String)).alias("input_shapes"),
    )
    out = df.with_columns(
        pl.lit(card).alias("card"),
        user_frames(pl.col("stack").fill_null("")).alias("frame"),
        pl.col("input_shapes").str.replace_all(r"[;\r\n]+", ";").str.strip_chars("; "),
        pl.lit(path.name).alias("source"),
    )
    return conform(out, STACK_SCHEMA)


def read_stacks(capture: Capture, cards: tuple[str, ...]) -> pl.DataFrame:
    """The operator stacks of every card of the capture (STACK_SCHEMA); a source that does not
    say its card takes the only card, else it is left out."""
    parts = []
    for card, path in stack_files(capture):
        label = card if card is not None else (cards[0] if len(cards) == 1 else None)
        if label is None:
            continue
        parts.append(read_operator_details(path, label))
    return pl.concat(parts) if parts else empty_stacks()
