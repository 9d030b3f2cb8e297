"""One analysis entry (analysis/session.py): every caller's findings are the session's.

On a real two-rank cluster (torch_npu 2024 CNN, Level1: rank 1 is the slow rank) and a
generated four-rank one, each rank is analysed by the session with the cluster's summary;
`npuscope report --card all` and `npuscope sql` over the cluster, and `report`, `export`,
`sql` and compare_runs over one rank's folder opened by itself, give the same findings. The
two stages (`diagnosed`, then `with_views`) and the extra files handed to the diagnosis
(parsers/capture_extras.py) are checked beside them.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.cluster import open_cluster, open_rank
from npuscope.analysis.compare import compare_runs
from npuscope.analysis.session import Diagnosed, Options, analyse, diagnosed, read_views
from npuscope.cli import main
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.capture_extras import capture_extras

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real" / "torch_npu_2024_cnn" / "level1"


def _key(f) -> tuple[str, str, str]:  # noqa: ANN001
    return (f.card, f.rule, f.title)


def _cli(*argv: str) -> str:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")  # `sql` writes bytes to stdout's buffer
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(list(argv)) == 0
    out.flush()
    return raw.getvalue().decode("utf-8")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    from npuscope.fixtures.generate import generate_cluster

    folder = tmp_path_factory.mktemp("session") / "cluster"
    generate_cluster(folder, ranks=4, steps=3, ops_per_step=80, seed=8)
    return folder


@pytest.fixture(params=["real", "generated"])
def cluster(request, generated) -> Path:
    return REAL if request.param == "real" else generated


def _session_findings(path: Path) -> dict[str, list[tuple[str, str, str]]]:
    """rank -> the session's findings of that rank, with the cluster's on it."""
    summary = open_cluster(path, cache=FrameCache(enabled=False))
    out = {}
    for r in summary.ranks:
        assert r.error is None
        profile = open_rank(summary, r.rank, cache=FrameCache(enabled=False))
        analysis = analyse(profile, Options(cluster=summary, rank=r.rank))
        out[r.rank] = [_key(f) for f in analysis.findings]
    if path == REAL:
        # The real CNN's two ranks compute alike (9,848 and 9,893 us per step): no slow rank.
        assert not summary.findings
        return out
    # The cluster's own findings land on their rank: the merge is exercised.
    assert any(f.rule in ("slow_rank", "slow_link") for f in summary.findings)
    theirs = {(f.card, f.rule) for f in summary.findings}
    assert any((rank, rule) in theirs for rank, found in out.items() for _, rule, _ in found)
    return out


def _rank_folder(cluster: Path, rank: str) -> Path:
    (info,) = cluster.glob(f"*/profiler_info_{rank}.json")
    return info.parent


def test_cluster_callers_have_the_sessions_findings(cluster):
    expected = _session_findings(cluster)
    report = json.loads(_cli("report", str(cluster), "--format", "json", "--no-cache", "--card", "all"))
    by_rank: dict[str, list[tuple[str, str, str]]] = {}
    for card in report["cards"]:
        by_rank.setdefault(card["rank"], []).extend((card["card"], f["rule"], f["title"]) for f in card["findings"])
    assert by_rank == expected
    rows = json.loads(
        _cli("sql", str(cluster), "SELECT rank, card, rule, title FROM findings", "--format", "json", "--no-cache")
    )
    got: dict[str, list[tuple[str, str, str]]] = {}
    for row in rows:
        got.setdefault(row["rank"], []).append((row["card"], row["rule"], row["title"]))
    assert {r: sorted(v) for r, v in got.items()} == {r: sorted(v) for r, v in expected.items() if v}


def test_one_rank_callers_have_the_sessions_findings(cluster, monkeypatch, tmp_path):
    folder = sorted(p for p in cluster.iterdir() if p.is_dir())[0]
    profile = open_profile(folder, cache=FrameCache(enabled=False))
    expected = [_key(f) for f in analyse(profile).findings]
    assert expected

    report = json.loads(_cli("report", str(folder), "--format", "json", "--no-cache", "--card", "all"))
    assert [(c["card"], f["rule"], f["title"]) for c in report["cards"] for f in c["findings"]] == expected

    rows = json.loads(
        _cli("sql", str(folder), "SELECT card, rule, title FROM findings", "--format", "json", "--no-cache")
    )
    assert sorted((r["card"], r["rule"], r["title"]) for r in rows) == sorted(expected)

    import npuscope.analysis.perfetto_export as perfetto

    seen = []
    real = perfetto.perfetto_trace

    def trace(profile, diagnosis, cards=None):  # noqa: ANN001, ANN202
        seen.append([_key(f) for f in diagnosis.findings])
        return real(profile, diagnosis, cards)

    monkeypatch.setattr(perfetto, "perfetto_trace", trace)
    _cli("export", str(folder), "--perfetto", str(tmp_path / "run.pftrace"), "--no-cache")
    assert seen == [expected]

    comparison = compare_runs(profile, profile)
    same = sorted(_key(new) for _, new in comparison.findings.unchanged)
    assert comparison.findings.new == () and comparison.findings.resolved == ()
    assert same == sorted(expected)


def test_two_stages(monkeypatch, generated):
    folder = _rank_folder(generated, "0")  # the generated cluster's slow rank
    profile = open_profile(folder, cache=FrameCache(enabled=False))
    summary = open_cluster(generated, cache=FrameCache(enabled=False))
    options = Options(cluster=summary, rank="0")

    import npuscope.analysis.session as session

    def no_views(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the first stage reads no view")

    monkeypatch.setattr(session, "cached_training_views", no_views)
    first = diagnosed(profile, options)
    monkeypatch.undo()
    assert first.diagnosis.findings and all(f.rule != "slow_rank" for f in first.diagnosis.findings)

    views = read_views(profile, options)
    whole = first.with_views(views)
    assert whole.views is views and whole.operators is first.diagnosis
    assert {_key(f) for f in first.diagnosis.findings} <= {_key(f) for f in whole.findings}
    assert any(f.rule == "slow_rank" for f in whole.findings)  # the cluster's, on this rank
    # A diagnosis made elsewhere (the explorer's) gives the same second stage.
    again = Diagnosed.of(profile, diagnose(profile), options).with_views(views)
    assert [_key(f) for f in again.findings] == [_key(f) for f in whole.findings]


def test_a_rank_opened_from_elsewhere_gets_none_of_the_clusters(tmp_path, generated):
    summary = open_cluster(generated, cache=FrameCache(enabled=False))
    assert "0" in summary.slow_ranks
    copy = tmp_path / "rank0_ascend_pt"
    shutil.copytree(_rank_folder(generated, "0"), copy)
    profile = open_profile(copy, cache=FrameCache(enabled=False))
    found = analyse(profile, Options(cluster=summary, rank="0")).findings
    assert found and all(f.rule != "slow_rank" for f in found)


def test_options_need_both_cluster_and_rank():
    with pytest.raises(ValueError):
        Options(rank="1")


def test_the_diagnosis_is_handed_the_extra_files(tmp_path, monkeypatch):
    """Stacks and core counts come from the parsers' value; a cached diagnosis reads no stack."""
    profile = open_profile(REAL / "rank0_ascend_pt", cache=FrameCache(enabled=False))
    extras = capture_extras(profile)
    plain = diagnose(profile, extras=extras)
    assert dict(plain.devices) == dict(extras.devices)
    assert "stacks" in extras.__dict__  # read once, kept with the value

    cache = FrameCache(tmp_path / "cache")
    diagnose(profile, cache=cache, extras=capture_extras(profile))
    cache.flush()
    again = capture_extras(profile)
    cached = diagnose(profile, cache=FrameCache(tmp_path / "cache"), extras=again)
    assert "stacks" not in again.__dict__ and "api_frames" not in again.__dict__
    assert [_key(f) for f in cached.findings] == [_key(f) for f in plain.findings]
