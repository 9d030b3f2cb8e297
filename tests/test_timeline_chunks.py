"""Large timelines are parsed in chunks; the result must not depend on where the cuts fall."""

from __future__ import annotations

import json

import orjson
import pytest
from polars.testing import assert_frame_equal

from npuscope.parsers.timeline import _raw_dicts, _raw_polars, _typed, read_timeline

TRACES = [
    "msprof_golden/mindstudio_profiler_output/msprof_20240605100000.json",
    "torch_npu_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
]


@pytest.mark.parametrize("rel", TRACES + ["paddle_cpu/*.paddle_trace.json"])
@pytest.mark.parametrize("chunk", [200, 4096, 65536])
def test_chunked_equals_whole(samples, rel, chunk):
    (path,) = samples.glob(rel)
    whole = read_timeline([path], chunk_bytes=1 << 40)
    assert_frame_equal(read_timeline([path], chunk_bytes=chunk), whole)


@pytest.mark.parametrize("rel", TRACES)
def test_polars_and_dict_paths_agree(samples, rel):
    path = samples / rel
    data = path.read_bytes()
    via_polars = _typed(_raw_polars(data), {"process": {}, "labels": {}, "thread": {}})
    via_dicts = _typed(_raw_dicts(orjson.loads(data)), {"process": {}, "labels": {}, "thread": {}})
    assert_frame_equal(via_polars, via_dicts)


def test_cut_inside_a_string_falls_back_to_a_whole_read(tmp_path):
    # An event name holding the boundary pattern: a cut there leaves unparseable pieces.
    events = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "CANN"}}]
    events += [
        {"name": "a},{b" * 50, "ph": "X", "pid": 1, "tid": 2, "ts": f"1717575960208{i:03d}.000", "dur": 1.0}
        for i in range(200)
    ]
    path = tmp_path / "msprof_20240101000000.json"
    path.write_text(json.dumps(events, separators=(",", ":")))
    got = read_timeline([path], chunk_bytes=100)
    assert got.height == 200
    assert got["name"].to_list() == ["a},{b" * 50] * 200
    assert got["ts_ns"].to_list() == [1717575960208000000 + i * 1000 for i in range(200)]
