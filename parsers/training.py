"""The training-level picture of an opened profile: steps, communication, host API, memory.

`read_training_views(profile)` looks beside the files the layout found (each torch_npu
ASCEND_PROFILER_OUTPUT, mindstudio_profiler_output, the db export and an `analysis.db` next
to it) for the files that carry each view, and derives from the profile's tasks and timeline
what no file carries. Each view is one canonical frame (schemas in steps.py,
communication.py, host_api.py, memory_views.py); every row says its `source`.

Choosing a source: per source of the layout (a torch_npu rank, a merged msprof export), the
most detailed file that yields rows wins (the order is in `_CANDIDATES`); between a text and
a db file of equal detail (communication.json and analysis.db hold the same numbers) the
export the profile itself was read from wins. Two sources of the same numbers are never
added. Cards no file covers get what the tasks and the timeline give: steps from the
timeline's Overlap Analysis, else derived from the tasks; collectives from the tasks; host
APIs from the timeline's `Level@api` events (the db's CANN_API for a db profile).

A file that cannot be used (missing keys, wrong types, NaN, absurd values, truncated JSON, a
damaged db) is a note, and the next source is tried; `strict=True` makes it a one-line
ProfileError instead. Nothing is written anywhere: SQLite files are opened read-only and
immutable (db.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from .communication import (
    BANDWIDTH_SCHEMA,
    COMMUNICATION_SCHEMA,
    LINKS_SCHEMA,
    bandwidth_view,
    communication_from_tasks,
    communication_view,
    links_view,
    parse_communication_json,
    parse_matrix_json,
    read_analysis_db,
    read_communication_statistic,
    read_db_communication,
)
from .csv_table import RowPolicy
from .host_api import HOST_API_SCHEMA, has_host_events, host_api_from_events, read_api_statistic
from .memory_views import (
    CURVE_SCHEMA,
    MEMORY_SCHEMA,
    TOP_OPS_SCHEMA,
    curve_view,
    memory_view,
    read_db_memory,
    read_memory_record,
    read_module_mem,
    read_operator_memory,
    top_ops_view,
)
from .profile import Profile
from .steps import (
    OVERLAP_PROCESS,
    STEPS_SCHEMA,
    derive_steps,
    overlap_steps,
    read_step_trace_table,
    read_step_trace_time,
    step_windows,
)
from .training_files import DB, TEXT, Place, Reading, device_of, distinct, load_json_object, places, sort_cards

VIEWS = ("steps", "communication", "bandwidth", "links", "host_api", "memory", "memory_top_ops", "memory_curve")

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "steps": STEPS_SCHEMA,
    "communication": COMMUNICATION_SCHEMA,
    "bandwidth": BANDWIDTH_SCHEMA,
    "links": LINKS_SCHEMA,
    "host_api": HOST_API_SCHEMA,
    "memory": MEMORY_SCHEMA,
    "memory_top_ops": TOP_OPS_SCHEMA,
    "memory_curve": CURVE_SCHEMA,
}


@dataclass(frozen=True)
class TrainingViews:
    """The training-level views of one profile (see each schema's module for units)."""

    steps: pl.DataFrame  # card, step, step_us, compute_us, communication_us, comm_not_overlapped_us, ...
    communication: pl.DataFrame  # card, op_type, op_name, count, total_us, transit_us, wait_us, sync_us, ...
    bandwidth: pl.DataFrame  # card, transport, size_mb, time_us, bandwidth_gbps, source
    links: pl.DataFrame  # card, group, src, dst, transport, size_mb, time_us, bandwidth_gbps, source
    host_api: pl.DataFrame  # card, api, level, count, total_us, avg_us, max_us, source
    memory: pl.DataFrame  # card, peak_allocated_mb, peak_reserved_mb, capacity_mb, app_reserved_mb, ...
    memory_top_ops: pl.DataFrame  # card, op_name, size_mb, count, total_mb, source
    memory_curve: pl.DataFrame  # card, ts_ns, allocated_mb, reserved_mb, source
    found: tuple[str, ...] = ()  # "steps: step_trace_time.csv", one per view and source
    notes: tuple[str, ...] = ()


def empty_views(notes: tuple[str, ...] = ()) -> TrainingViews:
    return TrainingViews(**{v: pl.DataFrame(schema=SCHEMAS[v]) for v in VIEWS}, found=(), notes=notes)


@dataclass
class _Run:
    """One read: the profile, the notes, the files already parsed, the frames gathered."""

    profile: Profile
    reading: Reading
    memo: dict[tuple[str, Path], object] = field(default_factory=dict)
    parts: dict[str, list[pl.DataFrame]] = field(default_factory=lambda: {v: [] for v in VIEWS})
    found: list[str] = field(default_factory=list)
    counted: bool = True  # False: the collectives' figures are not wanted (`read_training_views`)
    # Layout card label -> the profile's card, where a source's tasks say another card than
    # its folder (a torch_npu rank whose kernel_details' Device_id is not its rank).
    relabel: dict[str, str] = field(default_factory=dict)
    # Per view, files read but of no use, and why ("step_trace_time.csv has no Step values").
    unusable: dict[str, list[tuple[str | None, str]]] = field(default_factory=dict)
    places: tuple[Place, ...] = ()

    @property
    def events(self) -> pl.DataFrame | None:
        """The profile's timeline events, on the cards of its tasks (see `relabel`)."""
        events = self.profile.events
        if events is None or not self.relabel:
            return events
        key = ("events", Path())
        if key not in self.memo:
            self.memo[key] = events.with_columns(pl.col("card").replace(self.relabel))
        got = self.memo[key]
        assert isinstance(got, pl.DataFrame)
        return got

    @property
    def host_card(self) -> str:
        """Where rows that say `host` go: the only card, or `host` with several."""
        cards = self.profile.cards
        return cards[0] if len(cards) == 1 else "host"

    def once(self, kind: str, path: Path, what: str, read: Callable[[], object]) -> object:
        """`read()` of a file at most once per run (None, with a note, when it fails)."""
        key = (kind, path)
        if key not in self.memo:
            self.memo[key] = self.reading.attempt(path, what, read)
        return self.memo[key]

    def table(self, path: Path, what: str, read: Callable[[RowPolicy], pl.DataFrame]) -> pl.DataFrame | None:
        """A CSV read with the row policy; its notes (damaged rows skipped) kept."""
        policy = RowPolicy(strict=self.reading.strict)
        got = self.reading.attempt(path, what, lambda: read(policy))
        for n in policy.notes:
            self.reading.note(n.text)
        return got

    def add(self, view: str, frame: pl.DataFrame | None) -> bool:
        if frame is None or frame.height == 0:
            return False
        self.parts[view].append(frame)
        for source in distinct(frame["source"]):
            entry = f"{view}: {source}"
            if entry not in self.found:
                self.found.append(entry)
        return True

    def covered(self, view: str) -> set[str]:
        return {c for f in self.parts[view] for c in distinct(f["card"])}  # type: ignore[misc]


# --------------------------------------------------------------------------- file sources


def _analysis(run: _Run, place: Place) -> tuple[object, ...] | None:
    path = place.analysis_db
    if path is None:
        return None
    card = place.card if place.card is not None else run.host_card
    got = run.once("analysis", path, "steps and communication", lambda: read_analysis_db(path, card, run.reading.notes))
    return got if isinstance(got, tuple) else None


def _comm_json(run: _Run, place: Place) -> tuple[object, ...] | None:
    path = place.file("communication", "json")
    if path is None:
        return None
    card = place.card if place.card is not None else run.host_card
    got = run.once(
        "communication.json",
        path,
        "communication",
        lambda: parse_communication_json(load_json_object(path), path, card),
    )
    return got if isinstance(got, tuple) else None


def _db_comm(run: _Run, place: Place) -> tuple[object, ...] | None:
    path = place.db
    if path is None:
        return None
    got = run.once("db_comm", path, "communication", lambda: read_db_communication(path, place.card))
    return got if isinstance(got, tuple) else None


def _db_memory(run: _Run, place: Place) -> tuple[object, ...] | None:
    path = place.db
    if path is None:
        return None
    got = run.once("db_memory", path, "memory", lambda: read_db_memory(path, place.card))
    return got if isinstance(got, tuple) else None


def _frame(x: object) -> pl.DataFrame | None:
    return x if isinstance(x, pl.DataFrame) and x.height else None


def _steps_text(run: _Run, place: Place) -> pl.DataFrame | None:
    files = place.files("step_trace_time", "csv")
    if not files:
        return None
    got = run.table(files[0], "steps", lambda rows: read_step_trace_time(files, place.card, rows))
    if got is None:
        return None
    name = files[0].name
    if got.height == 0:
        run.unusable.setdefault("steps", []).append((place.card, f"{name} has no rows"))
        return None
    unnamed = got["step"].null_count()
    if unnamed and got.height > 1:
        # One row without a Step is the whole capture (torch_npu without step boundaries);
        # several cannot be told apart, nor be a step beside numbered ones.
        if unnamed == got.height:
            run.unusable.setdefault("steps", []).append((place.card, f"{name} has no Step values"))
            return None
        run.reading.note(f"{name}: {unnamed:,} row(s) without a Step value left out (the other rows are steps)")
        got = got.filter(pl.col("step").is_not_null())
    return got


def _steps_db(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _analysis(run, place)
    rows = _frame(got[0]) if got else None
    if rows is None or place.analysis_db is None:
        return None
    path = place.analysis_db
    card = place.card if place.card is not None else run.host_card
    return run.reading.attempt(path, "steps", lambda: read_step_trace_table(rows, card, path))


def _communication(run: _Run, times: pl.DataFrame, bws: pl.DataFrame | None, source: str) -> pl.DataFrame:
    """communication_view of a file's rows; without `run.counted`, only the cards and source
    it would have (it has a row per card and op of `times`): what chooses the source and
    what the tasks then cover are the same, the figures are not computed."""
    if run.counted:
        return communication_view(times, bws, source)
    cards = distinct(times["card"])
    return pl.DataFrame(
        {"card": cards, "source": [source] * len(cards)}, schema={"card": pl.String, "source": pl.String}
    )


def _comm_text(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _comm_json(run, place)
    times, bws = (_frame(got[0]), _frame(got[1])) if got else (None, None)
    return _communication(run, times, bws, "communication.json") if times is not None else None


def _comm_analysis(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _analysis(run, place)
    times, bws = (_frame(got[1]), _frame(got[2])) if got else (None, None)
    return _communication(run, times, bws, "analysis.db CommAnalyzerTime") if times is not None else None


def _comm_db(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _db_comm(run, place)
    ops, bws = (_frame(got[0]), _frame(got[1])) if got else (None, None)
    return _communication(run, ops, bws, "COMMUNICATION_OP") if ops is not None else None


def _comm_statistic(run: _Run, place: Place) -> pl.DataFrame | None:
    files = place.files("communication_statistic", "csv")
    if not files:
        return None
    return run.table(files[0], "communication", lambda rows: read_communication_statistic(files, place.card, rows))


def _bandwidth_text(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _comm_json(run, place)
    bws = _frame(got[1]) if got else None
    return bandwidth_view(bws, "communication.json") if bws is not None else None


def _bandwidth_analysis(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _analysis(run, place)
    bws = _frame(got[2]) if got else None
    return bandwidth_view(bws, "analysis.db CommAnalyzerBandwidth") if bws is not None else None


def _bandwidth_db(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _db_comm(run, place)
    bws = _frame(got[1]) if got else None
    return bandwidth_view(bws, "COMMUNICATION_TASK_INFO") if bws is not None else None


def _links_text(run: _Run, place: Place) -> pl.DataFrame | None:
    path = place.file("communication_matrix", "json")
    if path is None:
        return None
    card = place.card if place.card is not None else run.host_card
    got = run.once("matrix", path, "links", lambda: parse_matrix_json(load_json_object(path), path, card))
    matrix = _frame(got)
    return links_view(matrix, "communication_matrix.json") if matrix is not None else None


def _links_analysis(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _analysis(run, place)
    matrix = _frame(got[3]) if got else None
    return links_view(matrix, "analysis.db CommAnalyzerMatrix") if matrix is not None else None


def _links_db(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _db_comm(run, place)
    matrix = _frame(got[2]) if got else None
    return links_view(matrix, "COMMUNICATION_TASK_INFO") if matrix is not None else None


def _host_events(run: _Run) -> bool:
    """Whether the profile's events hold `Level@api` host calls (asked once per run)."""
    key = ("host_events", Path())
    if key not in run.memo:
        run.memo[key] = has_host_events(run.events)
    return bool(run.memo[key])


def _host_text(run: _Run, place: Place) -> pl.DataFrame | None:
    files = place.files("api_statistic", "csv")
    if not files:
        return None
    got = run.table(files[0], "host API", lambda rows: read_api_statistic(files, place.card, run.host_card, rows))
    if got is not None and set(got["card"].to_list()) == {"host"} and _host_events(run):
        # msprof counts every card's calls together (Device_id `host`): with several cards the
        # timeline's events say which card called what, and hold the same calls.
        return None
    return got


def _host_db(run: _Run, place: Place) -> pl.DataFrame | None:
    path = place.db
    if path is None:
        return None
    profile = run.profile
    events = run.events
    if profile.source_kind == DB and events is not None:
        # The profile's events are this db's CANN_API already.
        cards = [place.card] if place.card is not None else None
        return host_api_from_events(events, cards, "CANN_API")
    if _host_events(run):
        return None  # the timeline beside it holds the same calls: no second read of the db

    def read() -> pl.DataFrame:
        from .db import _Cards, _check_file, _Db, _events

        _check_file(path)
        with _Db(path) as db:
            db.load_strings()
            events = _events(db, _Cards(db, place.card))
        if events is None:
            return pl.DataFrame(schema=HOST_API_SCHEMA)
        return host_api_from_events(events, None, "CANN_API")

    return _frame(run.once("cann_api", path, "host API", read))


def _memory_records_text(run: _Run, place: Place) -> pl.DataFrame | None:
    files = place.files("memory_record", "csv")
    if not files:
        return None
    got = run.once(
        "memory_record",
        files[0],
        "memory",
        lambda: run.table(files[0], "memory", lambda r: read_memory_record(files, place.card, r)),
    )
    return _frame(got)


def _module_text(run: _Run, place: Place) -> pl.DataFrame | None:
    files = place.files("npu_module_mem", "csv")
    if not files:
        return None
    got = run.once(
        "npu_module_mem",
        files[0],
        "memory",
        lambda: run.table(files[0], "memory", lambda r: read_module_mem(files, place.card, r)),
    )
    return _frame(got)


def _memory_text(run: _Run, place: Place) -> tuple[pl.DataFrame, pl.DataFrame, str] | None:
    """(records, APP records, source) of the text export."""
    records = _memory_records_text(run, place)
    if records is not None:
        app = records if bool((records["component"] == "APP").any()) else _module_text(run, place)
        return records, app if app is not None else records.head(0), "memory_record.csv"
    module = _module_text(run, place)
    if module is not None and bool((module["component"] == "APP").any()):
        app = module.filter(pl.col("component") == "APP")
        return app, app, "npu_module_mem"
    return None


def _memory_db(run: _Run, place: Place) -> tuple[pl.DataFrame, pl.DataFrame, str] | None:
    got = _db_memory(run, place)
    if not got:
        return None
    records, module = _frame(got[0]), _frame(got[1])
    app = module.filter(pl.col("component") == "APP") if module is not None else None
    if records is not None:
        return records, app if app is not None else records.head(0), "MEMORY_RECORD"
    if app is not None and app.height:
        return app, app, "NPU_MODULE_MEM"
    return None


def _memory_views(run: _Run, place: Place, kind: str) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    got = _memory_text(run, place) if kind == TEXT else _memory_db(run, place)
    if got is None:
        return None
    records, app, source = got
    curve_notes: list[str] = []
    peaks = memory_view(records, app, source)
    curve = curve_view(records, source, curve_notes)
    for n in curve_notes:
        run.reading.note(n)
    return peaks, curve


def _top_ops_text(run: _Run, place: Place) -> pl.DataFrame | None:
    files = place.files("operator_memory", "csv")
    if not files:
        return None
    allocations = run.table(files[0], "memory", lambda rows: read_operator_memory(files, place.card, rows))
    return top_ops_view(allocations, "operator_memory.csv") if allocations is not None and allocations.height else None


def _top_ops_db(run: _Run, place: Place) -> pl.DataFrame | None:
    got = _db_memory(run, place)
    allocations = _frame(got[2]) if got else None
    return top_ops_view(allocations, "OP_MEMORY") if allocations is not None else None


Candidate = tuple[int, str, Callable[[_Run, Place], pl.DataFrame | None]]

# Per view: (detail, export kind, reader). Lower detail numbers are tried first; at equal
# detail the export the profile was read from goes first.
_CANDIDATES: dict[str, tuple[Candidate, ...]] = {
    "steps": ((0, TEXT, _steps_text), (0, DB, _steps_db)),
    "communication": (
        (0, TEXT, _comm_text),
        (0, DB, _comm_analysis),
        (1, DB, _comm_db),
        (2, TEXT, _comm_statistic),
    ),
    "bandwidth": ((0, TEXT, _bandwidth_text), (0, DB, _bandwidth_analysis), (1, DB, _bandwidth_db)),
    "links": ((0, TEXT, _links_text), (0, DB, _links_analysis), (1, DB, _links_db)),
    "host_api": ((0, TEXT, _host_text), (0, DB, _host_db)),
    "memory_top_ops": ((0, TEXT, _top_ops_text), (0, DB, _top_ops_db)),
}


def _ordered(candidates: tuple[Candidate, ...], prefer: str) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (c[0], c[1] != prefer))


def _from_files(run: _Run, place: Place) -> None:
    prefer = run.profile.source_kind
    for view, candidates in _CANDIDATES.items():
        for _, _, reader in _ordered(candidates, prefer):
            if run.add(view, reader(run, place)):
                break
    for kind in sorted((TEXT, DB), key=lambda k: k != prefer):
        got = _memory_views(run, place, kind)
        if got is not None and got[0].height:
            run.add("memory", got[0])
            run.add("memory_curve", got[1])
            break


# --------------------------------------------------------------------------- derived sources


def _places_of(run: _Run, cards: list[str]) -> list[Place]:
    """The places whose files could hold rows of `cards` (a merged export's: every card)."""
    return [p for p in run.places if p.card is None or p.card in cards]


def _why_derived(
    run: _Run,
    view: str,
    cards: list[str],
    sources: tuple[tuple[str, Callable[[Place], Path | None]], ...],
    extra: tuple[str, ...] = (),
) -> tuple[str, str]:
    """(lead, parenthesis) of a `<view> derived from the tasks` note that says only what was
    read: files found but of no use lead it ("step_trace_time.csv has no Step values: "),
    files a read refused are left out (their own note says why), the sources not found are
    the parenthesis ("(no communication.json or ...)")."""
    here = _places_of(run, cards)
    absent: list[str] = []
    for label, find in sources:
        paths = [x for x in (find(p) for p in here) if x is not None]
        if not paths:
            absent.append(label)
        elif not any(x in run.reading.failed for x in paths) and not _unusable(run, view, cards):
            absent.append(label)  # found, read, no rows for these cards: none of theirs
    absent += extra
    unusable = _unusable(run, view, cards)
    lead = unusable + ": " if unusable else ""
    if len(absent) > 1:
        named = ", ".join(absent[:-1]) + " or " + absent[-1]
    else:
        named = "".join(absent)
    return lead, f" (no {named})" if absent else ""


def _unusable(run: _Run, view: str, cards: list[str]) -> str:
    """What was found of no use for `view` on `cards`, said once ("" for nothing)."""
    said = [t for c, t in run.unusable.get(view, []) if c is None or c in cards]
    return "; ".join(dict.fromkeys(said))


def _step_file(p: Place) -> Path | None:
    return p.file("step_trace_time", "csv")


def _analysis_db(p: Place) -> Path | None:
    return p.analysis_db


def _cards_said(cards: list[str], every: list[str]) -> str:
    return "" if cards == every else f" of card(s) {', '.join(cards)}"


def _derived(run: _Run) -> None:
    profile = run.profile
    cards = list(profile.cards)
    tasks = profile.tasks
    events = run.events
    steps_left = [c for c in cards if c not in run.covered("steps")]
    if steps_left:
        if profile.time_problem is not None:
            run.reading.note("steps not derived from the tasks: their start times are damaged")
        else:
            steps_from = "STEP_TIME" if profile.source_kind == DB else "step_trace"
            windows = step_windows(tasks, profile.steps, events, steps_left, steps_from)
            if events is not None and run.add("steps", overlap_steps(events, windows, steps_left)):
                unusable = _unusable(run, "steps", [c for c in steps_left if c in run.covered("steps")])
                if unusable:  # said where the steps came from instead
                    run.reading.note(f"{unusable}: steps from the timeline's Overlap Analysis")
            left = [c for c in steps_left if c not in run.covered("steps")]
            if left:
                derived = derive_steps(tasks, windows, left)
                if run.add("steps", derived):
                    has_overlap = events is not None and bool((events["process"] == OVERLAP_PROCESS).any())
                    lead, why = _why_derived(
                        run,
                        "steps",
                        left,
                        (("step_trace_time.csv", _step_file), ("StepTraceTime", _analysis_db)),
                        () if has_overlap else ("Overlap Analysis",),
                    )
                    run.reading.note(
                        f"{lead}steps{_cards_said(left, cards)} derived from the tasks{why}: compute and "
                        "communication are the unions of their task intervals in each step"
                    )
                whole = [c for c in left if windows.told_by.get(c) == "capture"]
                if whole:
                    run.reading.note(
                        f"no step boundaries on card(s) {', '.join(whole)} (Step Id, step_trace, STEP_TIME, "
                        "ProfilerStep#N): the whole capture is one step row, step left empty"
                    )
    comm_left = [c for c in cards if c not in run.covered("communication")]
    if comm_left and run.add("communication", communication_from_tasks(tasks, comm_left)):
        lead, why = _why_derived(
            run,
            "communication",
            comm_left,
            (
                ("communication.json", lambda p: p.file("communication", "json")),
                ("CommAnalyzer tables", _analysis_db),
                ("COMMUNICATION_OP", lambda p: p.db),
                ("communication_statistic", lambda p: p.file("communication_statistic", "csv")),
            ),
        )
        run.reading.note(
            f"{lead}communication{_cards_said(comm_left, cards)} derived from the tasks{why}: counts and durations only"
        )
    if events is not None and "host" not in run.covered("host_api"):
        # (`host` rows of an api_statistic count every card's calls: none are added per card.)
        covered = run.covered("host_api")
        left_host = [c for c in [*cards, "host"] if c not in covered]
        source = "CANN_API" if profile.source_kind == DB else "timeline"
        run.add("host_api", host_api_from_events(events, left_host, source))


def _profile_places(profile: Profile) -> tuple[tuple[Place, ...], dict[str, str]]:
    """The capture's places on the cards of the profile's tasks, and the labels changed.

    The layout labels a torch_npu rank by its profiler_info_<rank>.json; newer kernel_details
    carry a Device_id, which the tasks keep (a rank 2 on device 4, a lone capture on card 6).
    The training-level files of a source belong to the card its tasks are on: with one source
    and one card that card, else the Device_id of the source's tasks file when it is one of
    the profile's cards."""
    got = places(profile.capture)
    cards = profile.cards
    relabel: dict[str, str] = {}
    out: list[Place] = []
    for p in got:
        card = p.card
        if card is not None and card not in cards:
            if len(got) == 1 and len(cards) == 1:
                card = cards[0]
            else:
                said = device_of(p.tasks)
                card = said if said is not None and said in cards else card
        if card != p.card and p.card is not None and card is not None:
            relabel[p.card] = card
            p = replace(p, card=card)
        out.append(p)
    return tuple(out), relabel


def read_training_views(profile: Profile, *, strict: bool = False, collectives: bool = True) -> TrainingViews:
    """The training-level views of an opened profile (see the module docstring).

    `strict=True` refuses a damaged training-level file with a one-line ProfileError instead
    of leaving it out with a note. `collectives=False` gives an empty communication view:
    its per-op figures are the costliest view of a small rank to compute, and a cluster's
    rank summary does without them; every file is still read and every source chosen as in
    a whole read, so the other views, `found` and the notes are those of a whole read.
    """
    run = _Run(profile, Reading(strict=strict), counted=collectives)
    run.places, run.relabel = _profile_places(profile)
    for place in run.places:
        _from_files(run, place)
    _derived(run)
    if not collectives:
        run.parts["communication"] = []
    frames: dict[str, pl.DataFrame] = {}
    for view in VIEWS:
        parts = run.parts[view]
        if len(parts) == 1 and view in _SORTED_BY_READERS:
            frames[view] = parts[0]
            continue
        frame = pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=SCHEMAS[view])
        frames[view] = _sorted(view, frame)
    return TrainingViews(**frames, found=tuple(run.found), notes=tuple(run.reading.notes))


_ORDER: dict[str, tuple[tuple[str, ...], bool]] = {
    "steps": (("step",), False),
    "communication": (("total_us",), True),
    "bandwidth": (("transport",), False),
    "links": (("group", "src", "dst", "transport"), False),
    "host_api": (("total_us",), True),
    "memory": ((), False),
    "memory_top_ops": (("size_mb",), True),
    "memory_curve": (("ts_ns",), False),
}


# Views whose every reader (steps.py, communication.py) returns its rows in the order of
# _ORDER already: one part needs no sort again.
_SORTED_BY_READERS = frozenset(("steps", "communication", "bandwidth", "links"))


def _sorted(view: str, frame: pl.DataFrame) -> pl.DataFrame:
    by, descending = _ORDER[view]
    return sort_cards(frame, *by, descending=descending)
