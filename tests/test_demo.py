"""The shipped demo profile is what the generator writes, and shows every planted problem."""

from __future__ import annotations

from npuscope.analysis import diagnose
from npuscope.fixtures.demo_profile import DEMO_ROOT, ensure_demo
from npuscope.fixtures.generate import write_demo
from npuscope.parsers import FrameCache, open_profile


def test_shipped_demo_matches_the_generator(tmp_path):
    fresh = write_demo(tmp_path)
    shipped = sorted(p.relative_to(DEMO_ROOT.parent) for p in DEMO_ROOT.rglob("*") if p.is_file())
    assert shipped == sorted(p.relative_to(tmp_path) for p in fresh.files)
    for rel in shipped:
        assert (DEMO_ROOT.parent / rel).read_bytes() == (tmp_path / rel).read_bytes(), rel


def test_demo_opens_with_the_planted_problems(tmp_path):
    planted = write_demo(tmp_path).planted
    prof = open_profile(ensure_demo(), cache=FrameCache(enabled=False))
    assert prof.cards == ("0", "1")
    assert prof.tasks.group_by("card").len().sort("card").rows() == [("0", 1120), ("1", 1120)]
    diag = diagnose(prof)
    got = {(f.rule, f.op_types[0], f.card) for f in diag.findings if f.severity == "warning"}
    assert got == {(p.rule, p.op_type, p.card) for p in planted}
