"""The README's examples are produced by the code: each example block's marker is run (a CLI
command, an explorer screen in Pilot, a string of the code) and its output compared with the
block, numbers included (the elision rules and the updater are in tests/readme_examples.py;
`python tests/readme_examples.py --update` rewrites the blocks that differ)."""

from __future__ import annotations

import pytest
from readme_examples import (
    README,
    Block,
    ExampleError,
    Workspace,
    apply,
    blocks,
    diff,
    evaluate,
    examples,
    indented_code,
    line_matches,
    matches,
    output,
    refresh,
)

TEXT = README.read_text(encoding="utf-8")
EXAMPLES = examples(TEXT)


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("readme-examples"))


def test_every_code_block_says_what_it_is():
    unmarked = [b.label for b in blocks(TEXT) if b.kind is None]
    assert unmarked == [], "add <!-- example: ... --> or <!-- not output: ... --> before these blocks"
    assert indented_code(TEXT) == [], "an indented code block cannot carry a marker: fence it"
    kinds = {b.spec.split()[0] for b in EXAMPLES}
    assert kinds == {"npuscope", "explorer", "text"}, kinds  # the README shows all three
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("block", EXAMPLES, ids=[f"L{b.line} {b.spec}" for b in EXAMPLES])
def test_readme_example_is_the_codes_output(block: Block, ws: Workspace):
    result = evaluate(block, ws)
    assert result.error is None, f"{block.label}: {result.error}"
    assert not result.changed, (
        f"{block.label} is not what the code prints (python tests/readme_examples.py --update):\n{diff(result)}"
    )


# ----------------------------------------------------------------------------- the rules themselves


def test_a_changed_number_in_the_readme_fails(ws: Workspace):
    """The comparison reads the numbers: one digit changed in the report block is a difference."""
    (report,) = [b for b in EXAMPLES if b.spec == "npuscope report --card 0 --top 3"]
    i = next(i for i, line in enumerate(report.lines) if " op types; compute " in line)
    changed = report.lines.copy()
    changed[i] = changed[i].replace(" tasks, ", " tasks, 1", 1)
    result = evaluate(Block(report.start, report.end, changed, report.kind, report.spec), ws)
    assert result.error is None and result.changed
    assert result.new == report.lines  # and the update puts the code's line back


def test_a_wrong_prompt_fails(ws: Workspace):
    (report,) = [b for b in EXAMPLES if b.spec == "npuscope report --card 0 --top 3"]
    lines = ["$ npuscope report --card 1 --top 3", *report.lines[1:]]
    result = evaluate(Block(report.start, report.end, lines, report.kind, report.spec), ws)
    assert result.error and "npuscope report --card 1 --top 3" in result.error


def test_a_failing_command_or_unknown_marker_is_an_error(ws: Workspace):
    for spec, words in [
        ("npuscope report /nonexistent/profile", "exited 2"),
        ("explorer nowhere 80x24", "unknown profile"),
        ("explorer demo big", "WxH"),
        ("screenshot demo", "unknown example kind"),
        ("text npuscope.analysis.totals:NO_SUCH_NAME", "NO_SUCH_NAME"),
    ]:
        with pytest.raises(ExampleError, match=words):
            output(Block(1, 2, [], "example", spec), ws)


def test_elision_rules():
    out = ["a 1", "b 2", "c 3", "/home/x/demo  (era_b)", "long advice; and more"]
    assert matches(out, out)
    assert matches(["a 1", "...", "long advice; and more"], out)
    assert matches(["...", "c 3", "...demo  (era_b)", "long advice; ..."], out)
    assert matches(["...", "a 1", "b 2", "c 3", "...", "..."], out)  # a gap may be empty
    assert matches(["a 1  ", *out[1:]], out)  # trailing whitespace
    assert not matches(["a 1", "b 2"], out)  # lines left over need a gap
    assert not matches(["a 1", "...", "c 4", "..."], out)  # a number differs
    assert not matches(["a 1", "b 2", "c 3", "/home/x/demo  (era_a)", "..."], out)
    assert not matches([*out, "d 4"], out)
    # `…` is drawn by the app where it cuts a cell: it is text, not an elision.
    assert line_matches("before Re…", "before Re…")
    assert not line_matches("before Re…", "before Recompilation")
    assert line_matches("x ... z", "x y z") and not line_matches("x ... z", "x y")


def test_refresh_keeps_the_elisions_and_takes_the_new_text():
    readme = [
        "header 1",
        ".../demo/profile  (era_b, CANN 7.0+)",
        "...",
        "== card 0 ==",
        "1,120 tasks, 22 op types; compute 226,754.7 us",
        "  [WARN] recompilation: 28 waits",
        "         at stake 136,013 us; Set FLAGS_npu_jit_compile=false, move to aclnn operators; ...",
        "  [WARN] ai_cpu: NonZero on AI_CPU",
        "         at stake 663 us; AI_CPU runs on the general-purpose cores: ...",
        "...",
    ]
    new = [
        "header 1",
        "/work/main/fixtures/demo/profile  (era_b, CANN 7.0+)",
        "note: steps derived",
        "",
        "== card 0 ==",
        "1,120 tasks, 21 op types; compute 221,184.2 us, communication 5,570.5 us",
        "  [WARN] recompilation: 28 waits",
        "         at stake 136,013 us; Turn off online compilation, move to aclnn operators, pad shapes; Paddle: x",
        "  [WARN] slow_rank: rank 0 is slow",
        "  [WARN] ai_cpu: NonZero on AI_CPU",
        "         at stake 663 us; AI_CPU runs on the general-purpose cores: usually a dtype, cast it",
        "Op statistics",
        "TransData 47.6",
    ]
    out = refresh(readme, new)
    assert matches(out, new)
    assert out == [
        "header 1",
        ".../demo/profile  (era_b, CANN 7.0+)",  # still matches: kept as written
        "...",
        "== card 0 ==",
        "1,120 tasks, 21 op types; compute 221,184.2 us, communication 5,570.5 us",
        "  [WARN] recompilation: 28 waits",
        # cut again as long as it was, back to a space
        "         at stake 136,013 us; Turn off online compilation, move to aclnn operators, pad ...",
        "  [WARN] slow_rank: rank 0 is slow",  # a new line, whole
        "  [WARN] ai_cpu: NonZero on AI_CPU",
        "         at stake 663 us; AI_CPU runs on the general-purpose cores: ...",
        "...",
    ]
    # A finding gone from the output leaves the block; without elisions the output is the block.
    gone = refresh(readme, [x for x in new if "recompilation" not in x and "136,013" not in x])
    assert not any("recompilation" in x or "136,013" in x for x in gone) and "..." in gone
    assert refresh(["a 1", "b 2"], ["a 1  ", "b 3", "c"]) == ["a 1", "b 3", "c"]
    # A new line wider than the block's widest whole line is cut (at a space) where lines are cut.
    wide = "  [WARN] slow_rank: Slow rank: most compute, 55,296 us/step vs median 44,244 us (spread 33.4%)"
    out = refresh(readme, [*new[:8], wide, *new[8:]])
    assert out[7] == "  [WARN] slow_rank: Slow rank: most ..."  # the widest whole line: 47
    assert matches(out, [*new[:8], wide, *new[8:]])


def test_update_rewrites_only_the_blocks_even_after_an_edit_elsewhere(ws: Workspace):
    text = (
        "intro\n\n<!-- example: text npuscope.analysis.totals:VOCABULARY -->\n```\ncompute stale\n```\n\n"
        "<!-- not output: code -->\n```\nx = 1\n```\nend\n"
    )
    (block,) = examples(text)
    result = evaluate(block, ws)
    assert result.changed and result.error is None
    edited = text.replace("intro\n", "intro, edited by someone else meanwhile\nmore\n")
    new_text, missing = apply(edited, [result])
    assert missing == []
    assert new_text.startswith("intro, edited by someone else meanwhile\nmore\n")
    assert "compute stale" not in new_text and "x = 1" in new_text and new_text.endswith("end\n")
    (again,) = examples(new_text)
    assert not evaluate(again, ws).changed
    # The block itself edited meanwhile: not written, said.
    _, missing = apply(text.replace("compute stale", "compute edited"), [result])
    assert missing == [result]
