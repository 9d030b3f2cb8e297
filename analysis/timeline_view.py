"""The data behind the explorer's mini timeline: per-lane busy fractions for any time window.

The explorer draws one row of block characters per kind of device work (AI Core, vector,
AI CPU, mix, communication), the device idle gaps coloured by their wait cause, and the
host compile / sync calls, so a long wait can be seen next to what the host was doing.
Redrawing happens on every key press, at any zoom, for cards with millions of tasks; a pass
over every interval per redraw is far too slow. `build_model` therefore sorts each lane's
interval starts and ends once and keeps prefix sums of them; `render` then answers "how
busy was this lane between two times" for every column edge with one `search_sorted` per
array, O(width log n) per lane.

Textual-free: only polars. The widget lives in `npuscope.tui.widgets.mini_timeline`.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

# Device lanes, top to bottom. Device task types not listed here fall into OTHER.
DEVICE_LANES = ("AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX", "COMM", "OTHER")
IDLE_LANE = "idle"
HOST_COMPILE_LANE = "host compile"
HOST_SYNC_LANE = "host sync"
HOST_LANES = (HOST_COMPILE_LANE, HOST_SYNC_LANE)

# Wait causes shown in the idle lane; the order breaks ties (the most actionable first).
CAUSES = ("recompilation", "host_op", "communication", "unexplained", "expected")

# Host API events (`Level@api` names) per host lane.
HOST_COMPILE_PATTERN = r"Compile"
HOST_SYNC_PATTERN = r"aclrtSynchronize|Synchronize|Memcpy|Memset"

MIN_WINDOW_NS = 1_000  # 1 µs: the deepest zoom


def lane_of(task_type: pl.Expr) -> pl.Expr:
    """The device lane of each task type (null or unknown types go to OTHER)."""
    return (
        pl.when(task_type.is_in(["AI_CORE", "AI_VECTOR_CORE", "AI_CPU"]))
        .then(task_type)
        .when(task_type.str.starts_with("MIX"))
        .then(pl.lit("MIX"))
        .when(task_type.is_in(["COMMUNICATION", "HCCL"]) | task_type.str.starts_with("HCCL"))
        .then(pl.lit("COMM"))
        .otherwise(pl.lit("OTHER"))
    )


@dataclass(frozen=True, eq=False)
class Intervals:
    """A set of [start, end) intervals as sorted starts and sorted ends plus their prefix sums.

    Starts and ends are sorted independently: covered time needs no pairing, because the
    busy time up to t (overlaps counted with multiplicity) is
    `sum(t - s for s < t) - sum(t - e for e < t)`.
    Prefix sums hold `x - base` (one leading 0) so they stay small; they are Int128 when
    Int64 could overflow.
    """

    starts: pl.Series  # Int64 ns, ascending
    ends: pl.Series  # Int64 ns, ascending
    start_sums: pl.Series  # len n + 1: sum of (starts[:i] - base)
    end_sums: pl.Series
    base: int

    @classmethod
    def build(cls, starts: pl.Series, ends: pl.Series, base: int) -> Intervals:
        starts = starts.cast(pl.Int64).sort()
        ends = ends.cast(pl.Int64).sort()
        n = starts.len()
        extreme = max(abs(_int(starts.min()) - base), abs(_int(ends.max()) - base)) if n else 0
        dtype = pl.Int64 if n * (extreme + 1) < 2**62 else pl.Int128

        def sums(s: pl.Series) -> pl.Series:
            rel = (s - base).cast(dtype)
            out: pl.Series = pl.concat([pl.Series([0], dtype=dtype), rel.cum_sum()])
            return out

        return cls(starts, ends, sums(starts), sums(ends), base)

    def __len__(self) -> int:
        return self.starts.len()

    @property
    def lo(self) -> int | None:
        return self.starts[0] if len(self) else None

    @property
    def hi(self) -> int | None:
        return self.ends[-1] if len(self) else None

    def busy_at(self, points: pl.Series, fracs: list[float]) -> list[float]:
        """Busy time in [base, k + f) for integer points k (ascending Int64) and f in [0, 1).

        B(k) is exact integer arithmetic; between integer nanoseconds no interval starts
        or ends, so B grows linearly with slope = intervals open at k.
        """
        if not len(self):
            return [0.0] * points.len()
        ns = self.starts.search_sorted(points, side="right")  # starts <= k
        ne = self.ends.search_sorted(points, side="right")  # ends <= k
        ss = self.start_sums.gather(ns).to_list()
        se = self.end_sums.gather(ne).to_list()
        base = self.base
        out = []
        for k, f, a, b, sa, sb in zip(points.to_list(), fracs, ns.to_list(), ne.to_list(), ss, se):
            t = k - base
            out.append((a * t - sa) - (b * t - sb) + f * (a - b))
        return out


@dataclass(frozen=True, eq=False)
class Lane:
    name: str
    intervals: Intervals
    # Idle lane only: the same gaps split by wait cause, in CAUSES order.
    causes: tuple[tuple[str, Intervals], ...] = ()


@dataclass(frozen=True, eq=False)
class TimelineModel:
    """Everything `render` needs for one card; built once per card."""

    card: str
    origin_ns: int  # the card's first task start: time zero on the axis
    start_ns: int  # span of all lanes (idle gaps and host calls may precede the origin)
    end_ns: int
    lanes: tuple[Lane, ...]

    @property
    def lane_names(self) -> tuple[str, ...]:
        return tuple(lane.name for lane in self.lanes)


@dataclass(frozen=True)
class LaneView:
    name: str
    levels: tuple[float, ...]  # busy fraction 0..1 per column
    causes: tuple[str | None, ...]  # idle lane: dominant wait cause per column; else all None


def _int(value: object) -> int:
    """The min or max of a non-empty Int64 column, as the int it is."""
    assert isinstance(value, int), value
    return value


class Window(tuple[int, int]):
    """A `(start_ns, end_ns)` pair that remembers the span it is clamped to (`bounds`).

    Compares, hashes and unpacks like the plain tuple; `fit` makes one, and `zoom`, `pan`
    and `ensure_visible` keep its bounds.
    """

    bounds: tuple[int, int] | None

    def __new__(cls, start_ns: int, end_ns: int, bounds: tuple[int, int] | None = None) -> Window:
        self = super().__new__(cls, (int(start_ns), int(end_ns)))
        self.bounds = bounds
        return self

    def __getnewargs__(self) -> tuple[int, int, tuple[int, int] | None]:
        return (self[0], self[1], self.bounds)

    def __repr__(self) -> str:
        return f"Window({self[0]}, {self[1]}, bounds={self.bounds})"

    @property
    def start_ns(self) -> int:
        return self[0]

    @property
    def end_ns(self) -> int:
        return self[1]

    @property
    def width_ns(self) -> int:
        return self[1] - self[0]


def build_model(tasks: pl.DataFrame, events: pl.DataFrame | None, card: str) -> TimelineModel:
    """Sort each lane's intervals of `card` once, so that drawing any window is fast."""
    t = tasks.filter(pl.col("card") == card).filter(pl.col("start_ns").is_not_null())
    t = t.select(
        lane_of(pl.col("task_type")).alias("lane"),
        pl.col("start_ns").cast(pl.Int64).alias("s"),
        (
            pl.col("start_ns").cast(pl.Int64)
            + (pl.col("duration_us").fill_null(0.0).clip(lower_bound=0.0) * 1000).round(0).cast(pl.Int64)
        ).alias("e"),
        pl.col("wait_us").fill_null(0.0).alias("wait_us"),
        (pl.col("wait_cause") if "wait_cause" in tasks.columns else pl.lit(None, dtype=pl.String).alias("wait_cause")),
    )
    idle = t.filter(pl.col("wait_us") > 0).select(
        (pl.col("s") - (pl.col("wait_us") * 1000).round(0).cast(pl.Int64)).alias("s"),
        pl.col("s").alias("e"),
        "wait_cause",
    )

    # (name, starts, ends) raw, before the base is known.
    raw: list[tuple[str, pl.Series, pl.Series, pl.DataFrame | None]] = []
    for key, part in sorted(
        t.partition_by("lane", as_dict=True, include_key=False).items(),
        key=lambda kv: DEVICE_LANES.index(str(kv[0][0])),
    ):
        if part.height:
            raw.append((str(key[0]), part["s"], part["e"], None))
    raw.append((IDLE_LANE, idle["s"], idle["e"], idle))

    if events is not None and events.height:
        host = events.filter(
            (pl.col("ph") == "X")
            & pl.col("card").is_in([card, "host"])
            & pl.col("name").str.contains("@", literal=True)
            & pl.col("ts_ns").is_not_null()
            & pl.col("dur_ns").is_not_null()
        ).select("name", pl.col("ts_ns").alias("s"), (pl.col("ts_ns") + pl.col("dur_ns")).alias("e"))
        if host.height:
            for name, pattern in (
                (HOST_COMPILE_LANE, HOST_COMPILE_PATTERN),
                (HOST_SYNC_LANE, HOST_SYNC_PATTERN),
            ):
                part = host.filter(pl.col("name").str.contains(pattern))
                raw.append((name, part["s"], part["e"], None))

    los = [_int(s.min()) for _, s, _, _ in raw if s.len()]
    his = [_int(e.max()) for _, _, e, _ in raw if e.len()]
    origin = _int(t["s"].min()) if t.height else (min(los) if los else 0)
    start = min(los) if los else origin
    end = max(his) if his else start + MIN_WINDOW_NS
    end = max(end, start + MIN_WINDOW_NS)

    lanes = []
    for name, s, e, frame in raw:
        causes: tuple[tuple[str, Intervals], ...] = ()
        if frame is not None:
            causes = tuple(
                (cause, Intervals.build(part["s"], part["e"], start))
                for cause in CAUSES
                if (part := frame.filter(pl.col("wait_cause") == cause)).height
            )
        lanes.append(Lane(name, Intervals.build(s, e, start), causes))
    return TimelineModel(card=card, origin_ns=int(origin), start_ns=int(start), end_ns=int(end), lanes=tuple(lanes))


def _edges(start_ns: int, end_ns: int, width: int) -> tuple[pl.Series, list[float]]:
    """The width + 1 column edges as integer ns plus a fraction of a ns (exact split)."""
    span = end_ns - start_ns
    ks, fs = [], []
    for i in range(width + 1):
        q, r = divmod(span * i, width)
        ks.append(start_ns + q)
        fs.append(r / width)
    return pl.Series(ks, dtype=pl.Int64), fs


def _per_column(iv: Intervals, edges: pl.Series, fracs: list[float]) -> list[float]:
    b = iv.busy_at(edges, fracs)
    return [b[i + 1] - b[i] for i in range(len(b) - 1)]


def render(model: TimelineModel, start_ns: int, end_ns: int, width: int) -> tuple[LaneView, ...]:
    """Per lane, the busy fraction (0..1, clipped) of each of `width` columns of the window.

    For the idle lane, `causes` holds each column's dominant wait cause (the named cause
    with the most idle time in the column; ties go to the earlier entry of CAUSES; None
    when the column has no attributed wait).
    """
    width = max(int(width), 0)
    if width == 0:
        return tuple(LaneView(lane.name, (), ()) for lane in model.lanes)
    start_ns, end_ns = int(start_ns), int(end_ns)
    if end_ns <= start_ns:
        end_ns = start_ns + 1
    col_ns = (end_ns - start_ns) / width
    edges, fracs = _edges(start_ns, end_ns, width)
    nones = (None,) * width
    views = []
    for lane in model.lanes:
        busy = _per_column(lane.intervals, edges, fracs)
        levels = tuple(min(1.0, max(0.0, b / col_ns)) for b in busy)
        causes: tuple[str | None, ...] = nones
        if lane.causes:
            per_cause = [(cause, _per_column(iv, edges, fracs)) for cause, iv in lane.causes]
            dominant: list[str | None] = []
            for i in range(width):
                best, best_t = None, 0.0
                for cause, times in per_cause:
                    if times[i] > best_t + 1e-9:
                        best, best_t = cause, times[i]
                dominant.append(best)
            causes = tuple(dominant)
        views.append(LaneView(lane.name, levels, causes))
    return tuple(views)


def fit(model: TimelineModel) -> Window:
    """The window showing the whole model."""
    return Window(model.start_ns, model.end_ns, bounds=(model.start_ns, model.end_ns))


def _bounds_of(window: tuple[int, int], bounds: tuple[int, int] | None) -> tuple[int, int] | None:
    if bounds is not None:
        return (int(bounds[0]), int(bounds[1]))
    return getattr(window, "bounds", None)


def _clamp(start: int, width: int, bounds: tuple[int, int] | None) -> Window:
    """A window of `width` ns (at least 1 µs) starting at `start`, moved inside `bounds`.

    Integers only: epoch nanoseconds (~1.7e18) are beyond float64's exact range, so
    offsets are computed as floats and rounded before they are added.
    """
    w = max(MIN_WINDOW_NS, int(width))
    s = int(start)
    if bounds is not None:
        lo, hi = bounds
        w = min(w, max(hi - lo, MIN_WINDOW_NS))
        s = min(max(s, lo), max(lo, hi - w))
    return Window(s, s + w, bounds)


def zoom(window: tuple[int, int], factor: float, center_ns: int, *, bounds: tuple[int, int] | None = None) -> Window:
    """Zoom by `factor` (> 1 in, < 1 out) around `center_ns`.

    A center inside the window keeps its place on screen; one outside becomes the middle.
    Clamped to the model span (`bounds`, or the window's own) and to at least 1 µs.
    """
    start, end = int(window[0]), int(window[1])
    center_ns = int(center_ns)
    b = _bounds_of(window, bounds)
    old = max(end - start, 1)
    new = round(old / factor) if factor > 0 else old
    new = max(MIN_WINDOW_NS, new)
    if b is not None:
        new = min(new, max(b[1] - b[0], MIN_WINDOW_NS))
    rel = (center_ns - start) / old if start <= center_ns <= end else 0.5
    return _clamp(center_ns - round(rel * new), new, b)


def pan(window: tuple[int, int], fraction: float, *, bounds: tuple[int, int] | None = None) -> Window:
    """Shift by `fraction` of the window width (negative: left), clamped to the span."""
    start, end = int(window[0]), int(window[1])
    width = end - start
    return _clamp(start + round(fraction * width), width, _bounds_of(window, bounds))


def ensure_visible(
    window: tuple[int, int], start_ns: int, end_ns: int, *, bounds: tuple[int, int] | None = None
) -> Window:
    """The window, panned (same zoom) so the task [start_ns, end_ns) is inside it.

    Unchanged when the task is already fully inside. A task partly inside or within one
    window width of it is scrolled in just far enough to sit a tenth of the window from
    the edge (stepping through neighbouring tasks scrolls smoothly); a task farther away
    is centred; a task longer than 80% of the window starts a tenth from the left.
    """
    start, end = int(window[0]), int(window[1])
    b = _bounds_of(window, bounds)
    width = end - start
    start_ns = int(start_ns)
    end_ns = max(int(end_ns), start_ns)
    if start <= start_ns and end_ns <= end:
        return window if isinstance(window, Window) else Window(start, end, b)
    length = end_ns - start_ns
    margin = width // 10
    if length >= width - 2 * margin:
        new_start = start_ns - margin
    elif end_ns < start - width or start_ns > end + width:
        new_start = start_ns + (length - width) // 2
    elif start_ns < start:
        new_start = start_ns - margin
    else:
        new_start = end_ns + margin - width
    return _clamp(new_start, width, b)


__all__ = [
    "CAUSES",
    "DEVICE_LANES",
    "HOST_LANES",
    "IDLE_LANE",
    "Intervals",
    "Lane",
    "LaneView",
    "TimelineModel",
    "Window",
    "build_model",
    "ensure_visible",
    "fit",
    "pan",
    "render",
    "zoom",
]


StepMark = tuple[int | None, int, int]  # (step number or None, start_ns, end_ns)
STEP_EDGE = "│"


def step_row(marks: tuple[StepMark, ...], start_ns: int, end_ns: int, width: int) -> str:
    """One line of `width` cells marking step boundaries in the window: `│` where a step
    starts (and where the last one ends), its number after it while there is room."""
    width = max(int(width), 0)
    cells = [" "] * width
    if not width or not marks or end_ns <= start_ns:
        return "".join(cells)
    col_ns = (end_ns - start_ns) / width

    def column(ns: int) -> int | None:
        if not start_ns <= ns <= end_ns:
            return None
        return min(int((ns - start_ns) / col_ns), width - 1)

    edges: list[tuple[int, str]] = []
    for step, s, _ in marks:
        c = column(s)
        if c is not None:
            edges.append((c, "" if step is None else str(step)))
    last = column(max(e for _, _, e in marks))
    if last is not None:
        edges.append((last, ""))
    edges.sort()
    for i, (c, label) in enumerate(edges):
        cells[c] = STEP_EDGE
        room = (edges[i + 1][0] if i + 1 < len(edges) else width) - c - 1
        if label and len(label) <= room:
            cells[c + 1 : c + 1 + len(label)] = list(label)
    return "".join(cells)
