"""One progress channel: the open reports bytes of the whole capture, inside the timeline too.

A generated export with a timeline of ~20 MB (three pieces of 8 MB) is opened with a sink and
nothing else: the sink sees every file and every piece of the timeline, by bytes of all the
capture's files, only rising, ending at their total. A cancel event set from the sink while
the timeline is parsed stops the open inside the timeline; the headless loader and the
explorer's loader just pass their sink and cancel event.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from progress_sink import Seen as Sink

from npuscope import loading
from npuscope.fixtures.generate import generate
from npuscope.parsers import Cancelled, FrameCache, ReadOptions, open_profile
from npuscope.parsers.timeline import CHUNK_BYTES
from npuscope.tui import load_job


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    g = generate(tmp_path_factory.mktemp("timeline") / "p", rows=2_000, json_mb=20)
    (trace,) = [p for p in g.files if p.suffix == ".json"]
    assert trace.stat().st_size > 2 * CHUNK_BYTES
    return g, trace


def _before(files: tuple[Path, ...], trace: Path) -> int:
    """Bytes of the files read before the timeline (the open reads the tasks first)."""
    return sum(p.stat().st_size for p in files if p.name.startswith("op_summary"))


def test_progress_rises_to_the_total_through_the_timeline(export):
    g, trace = export
    sink = Sink()
    prof = open_profile(g.root, cache=FrameCache(enabled=False), progress=sink)
    total = sum(p.stat().st_size for p in prof.files)
    assert set(prof.files) == set(g.files)
    done = [d for d, _, _ in sink.calls]
    assert done == sorted(done) and done[-1] == total
    assert all(t == total for _, t, _ in sink.calls)
    inside = sink.of("timeline")
    start = _before(prof.files, trace)
    size = trace.stat().st_size
    assert len(inside) >= size // CHUNK_BYTES + 1  # each piece, then the file's end
    assert inside[0] > start and inside[0] < start + size  # counted after the files before it
    assert inside[-1] == start + size


def test_cancel_from_the_sink_stops_inside_the_timeline(export):
    g, trace = export
    start = _before(g.files, trace)
    size = trace.stat().st_size
    sink = Sink("timeline", stop_at=start + 1)
    with pytest.raises(Cancelled):
        open_profile(g.root, cache=FrameCache(enabled=False), progress=sink, cancel=sink.cancel)
    inside = sink.of("timeline")
    assert inside and inside[-1] < start + size  # the piece after the one that set it never came
    assert all(label not in ("op statistic", "step trace") for _, _, label in sink.calls)


def test_a_set_cancel_stops_an_open_with_no_sink(export):
    g, _ = export
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        open_profile(g.root, cache=FrameCache(enabled=False), cancel=cancel)


def test_the_headless_loader_passes_its_line_the_same_reports(export, monkeypatch):
    g, _ = export
    seen: list[Sink] = []

    class Line(Sink):
        def __init__(self, what: str) -> None:
            super().__init__()
            seen.append(self)

        def __enter__(self) -> Line:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr(loading, "StderrProgress", Line)
    with loading.profile_for_command(str(g.root), capture=None, no_cache=True) as prof:
        total = sum(p.stat().st_size for p in prof.files)
    (line,) = seen
    direct = Sink()
    open_profile(g.root, cache=FrameCache(enabled=False), progress=direct)
    assert line.calls == direct.calls and line.calls[-1][0] == total


def test_the_explorers_loader_passes_its_sink_and_cancel(export):
    g, trace = export
    start = _before(g.files, trace)
    sink = Sink("timeline", stop_at=start + 1)
    with pytest.raises(Cancelled):
        load_job.load_profile(
            g.root,
            capture=None,
            read=ReadOptions(),
            thresholds=None,
            use_cache=False,
            cancel=sink.cancel,
            progress=sink,
        )
    assert sink.of("timeline") and sink.of("timeline")[-1] < start + trace.stat().st_size
