"""The filter language of the explorer's `/` bar, and the sort and totals of its tables.

Users narrow millions of tasks to the few they care about by typing, so parsing is strict
(a typo is reported at once, naming the term) and every filter compiles to one polars
expression evaluated in a single pass. Textual-free: the explorer and headless commands share it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from npuscope.parsers.columns import UNKNOWN
from npuscope.parsers.frames import is_communication

from .rules import CORE_TASKS, CUSTOM_KERNEL_TYPES, aclnn_tasks, aclop_tasks
from .totals import compute_tasks

QUERY_HELP = """\
Filter: every space-separated term must match; -term negates; "quoted text" is one term;
a lone | separates alternatives: a b | c keeps the rows matching a and b, or c.
  matmul           op name or op type contains matmul (any case)
  name:gather      op name contains gather (any case)
  type:Cast        op type is Cast (any case); * matches anything: type:MatMul*
  core:AI_CPU      task type (alias task:), any case; core:mix = MIX_AIC and MIX_AIV
  dur>1000         duration in us; also dur>= dur< dur<= dur=; units: dur>2ms
  wait>1000        wait before the task in us, the same comparisons
  cause:host_op    wait cause: recompilation (recompile), host_op (host), communication
                   (comm), expected, unexplained, any (has a cause), none
  confidence:suspected  the wait cause is only suspected (no timeline); or evidence
  aclnn  aclop     aclnn ops / classic acl ops: neither counts communication, CPU tasks or
                   an application's own kernels (quote "aclnn" to search the name)
  kind:compute     compute tasks (every task but communication); kind:comm the collectives;
                   kind:custom the op types of an application's own kernels
  block<12         Block Dim, the same comparisons as dur
  dur>=10xavg      duration at least 10x the mean of its op type and task type in the table
  fused:RmsNorm    the tasks of the op sequences the fused operator RmsNorm does
  shape:8,4096     input shapes contain 8,4096
  dtype:BF16       input dtypes contain BF16 (any case)
  card:0           tasks of card 0
  state:dynamic    op state is dynamic (any case)
On op statistics only text, type:, core: and card: apply; other terms are ignored there.
kind:custom, xavg and fused: look at the whole table (the card's tasks), not the rows left."""

_FORMS = (
    'text, "quoted text", -term, name:x, type:Cast, type:MatMul*, core:AI_CPU (task:), '
    "dur>1000 (>= < <= =), wait>1000, cause:recompilation|host_op|communication|expected|unexplained|any|none, "
    "confidence:suspected|evidence, "
    "aclnn, aclop, kind:compute|comm|custom, block<12, dur>=10xavg, fused:RmsNorm, shape:8,4096, "
    "dtype:BF16, card:0, state:dynamic, a | b"
)

_KEYS = {
    "name": "name",
    "type": "type",
    "core": "core",
    "task": "core",
    "cause": "cause",
    "shape": "shape",
    "dtype": "dtype",
    "card": "card",
    "state": "state",
    "kind": "kind",
    "fused": "fused",
    "confidence": "confidence",
}
_CMP_FIELDS = {"dur": "duration_us", "duration": "duration_us", "wait": "wait_us", "block": "block_num"}
_KINDS = {"compute": "compute", "communication": "communication", "comm": "communication", "custom": "custom"}
_RELATIVE = "xavg"
"""`dur>=10xavg`: a number of times the mean of the row's op type and task type."""
_GROUP_COLUMNS = ("op_type", "task_type")
_SEQUENCE_COLUMNS = ("card", "op_type", "task_type", "start_ns", "duration_us")
_CAUSES = {
    "recompilation": "recompilation",
    "recompile": "recompilation",
    "host_op": "host_op",
    "host": "host_op",
    "communication": "communication",
    "comm": "communication",
    "expected": "expected",
    "unexplained": "unexplained",
    "any": "any",
    "none": "none",
}
_UNITS = (("us", 1.0), ("µs", 1.0), ("ms", 1_000.0), ("s", 1_000_000.0))
# `aten::mm` is text, not key `aten`: a double colon never starts a value.
_KEY_RE = re.compile(r"([A-Za-z_]+):(?!:)")
_CMP_RE = re.compile(r"([A-Za-z_]+)(>=|<=|==|=|>|<)")

# Columns each term kind reads, on the task table and on the op statistics table
# (a kind missing from _STATS_COLUMNS is ignored on op statistics).
_TASK_COLUMNS = {
    "text": ("op_name", "op_type"),
    "name": ("op_name",),
    "type": ("op_type",),
    "core": ("task_type",),
    "cause": ("wait_cause",),
    "flag": ("is_aclnn", "task_type", "op_type"),
    "shape": ("input_shapes",),
    "dtype": ("input_dtypes",),
    "card": ("card",),
    "state": ("op_state",),
    "fused": _SEQUENCE_COLUMNS,
    "confidence": ("wait_confidence",),
}
_STATS_COLUMNS = {"text": ("op_type",), "type": ("op_type",), "core": ("core_type",), "card": ("card",)}


class QueryError(ValueError):
    """A filter that cannot be parsed; the one-line message names the term and the forms."""

    def __init__(self, term: str, why: str) -> None:
        super().__init__(" ".join(f"bad filter term {term!r}: {why}; accepted: {_FORMS}".split()))
        self.term = term


@dataclass(frozen=True)
class _Term:
    raw: str
    negate: bool
    kind: str  # text name type core cmp num rel cause flag shape dtype card state kind fused
    # str; bool for flag; (column, operator, number) for cmp (dur, wait), num (block) and rel
    # (the number times the mean of the row's op type and task type)
    value: str | bool | tuple[str, str, float]

    def task_columns(self) -> tuple[str, ...]:
        """The columns of the task table the term reads."""
        if isinstance(self.value, tuple):
            return (self.value[0], *_GROUP_COLUMNS) if self.kind == "rel" else (self.value[0],)
        if self.kind == "kind":
            return ("task_type",) if self.value != "custom" else ("task_type", "op_type")
        return _TASK_COLUMNS[self.kind]


@dataclass(frozen=True)
class Query:
    """A parsed filter. `terms` are the terms as typed (quotes and leading `-` kept), those of
    every alternative; `_groups` the alternatives (a row matches when it matches every term of
    one of them)."""

    text: str
    terms: tuple[str, ...] = ()
    _compiled: tuple[_Term, ...] = field(default=(), repr=False)
    _groups: tuple[tuple[_Term, ...], ...] = field(default=(), repr=False)

    def ignored_on_stats(self) -> tuple[str, ...]:
        """The terms `filter_stats` skips because op statistics have no such column."""
        return tuple(t.raw for t in self._compiled if t.kind not in _STATS_COLUMNS)


def parse_query(text: str) -> Query:
    groups: list[list[_Term]] = [[]]
    for tok in _tokens(text):
        if tok[0] == "|":
            if not groups[-1]:
                raise QueryError("|", "an alternative needs terms on both sides: a b | c")
            groups.append([])
            continue
        term = _compile(*tok)
        if term is not None:
            groups[-1].append(term)
    if len(groups) > 1 and not groups[-1]:
        raise QueryError("|", "an alternative needs terms on both sides: a b | c")
    compiled = tuple(t for g in groups for t in g)
    return Query(
        text=text,
        terms=tuple(t.raw for t in compiled),
        _compiled=compiled,
        _groups=tuple(tuple(g) for g in groups) if compiled else (),
    )


def _task_groups(query: Query) -> list[list[tuple[_Term, tuple[str, ...]]]]:
    """The alternatives of `query` with the task-table columns of each term."""
    return [[(t, t.task_columns()) for t in g] for g in query._groups]


def _stats_groups(query: Query) -> list[list[tuple[_Term, tuple[str, ...]]]]:
    """The alternatives of `query` with the terms op statistics can apply (an alternative
    left with none keeps every row)."""
    return [[(t, _STATS_COLUMNS[t.kind]) for t in g if t.kind in _STATS_COLUMNS] for g in query._groups]


def _tokens(text: str) -> list[tuple[str, str, int | None]]:
    """Split on whitespace outside quotes: (raw term, term without quotes, where the first quote was)."""
    out: list[tuple[str, str, int | None]] = []
    raw: list[str] = []
    value: list[str] = []
    quoted_at: int | None = None
    in_quote = False
    for ch in text + " ":
        if ch == '"':
            in_quote = not in_quote
            if quoted_at is None:
                quoted_at = len(value)
            raw.append(ch)
        elif ch.isspace() and not in_quote:
            if raw:
                out.append(("".join(raw), "".join(value), quoted_at))
            raw, value, quoted_at = [], [], None
        else:
            raw.append(ch)
            value.append(ch)
    if in_quote:
        bad = "".join(raw).rstrip()
        raise QueryError(bad, "the quote is not closed")
    return out


def _compile(raw: str, value: str, quoted_at: int | None) -> _Term | None:
    negate = False
    if value.startswith("-") and quoted_at != 0:
        negate, value = True, value[1:]
        quoted_at = None if quoted_at is None else quoted_at - 1
        if not value:
            raise QueryError(raw, "a lone - negates nothing; write -term")
    if not value:
        return None
    if quoted_at == 0:
        return _Term(raw, negate, "text", value)
    head = value if quoted_at is None else value[:quoted_at]
    if head.lower() in ("aclnn", "aclop") and head == value:
        return _Term(raw, negate, "flag", head.lower() == "aclnn")
    m = _KEY_RE.match(head)
    if m:
        key, arg = m.group(1).lower(), value[m.end() :]
        if key not in _KEYS:
            if key in _CMP_FIELDS:
                raise QueryError(raw, f"{key} compares, write {key}>1000 (or >= < <= =)")
            raise QueryError(raw, f"unknown key {m.group(1)}: (quote the term to search text)")
        if not arg:
            raise QueryError(raw, f"{m.group(1)}: needs a value")
        return _key_term(raw, negate, _KEYS[key], arg)
    m = _CMP_RE.match(head)
    if m:
        name = m.group(1).lower()
        if name not in _CMP_FIELDS:
            raise QueryError(raw, f"only dur, wait and block compare, not {m.group(1)} (quote the term to search text)")
        op = "=" if m.group(2) == "==" else m.group(2)
        column, arg = _CMP_FIELDS[name], value[m.end() :]
        if arg.lower().endswith(_RELATIVE) and column == "duration_us":
            return _Term(raw, negate, "rel", (column, op, _number(raw, arg[: -len(_RELATIVE)], unit=False)))
        kind = "cmp" if column != "block_num" else "num"
        return _Term(raw, negate, kind, (column, op, _number(raw, arg, unit=column != "block_num")))
    if head[:1] in ("<", ">", "="):
        raise QueryError(raw, "a comparison needs its field and no spaces: dur>1000 or wait>1000")
    return _Term(raw, negate, "text", value)


def _key_term(raw: str, negate: bool, kind: str, arg: str) -> _Term:
    if kind == "kind":
        which = _KINDS.get(arg.lower())
        if which is None:
            raise QueryError(raw, f"unknown kind {arg}; use compute, communication (comm) or custom")
        return _Term(raw, negate, kind, which)
    if kind == "fused":
        from .fusion_patterns import PATTERNS

        names = {p.fused_op.lower(): p.fused_op for p in PATTERNS}
        if arg.lower() not in names:
            raise QueryError(raw, f"no fused operator {arg}; known: {', '.join(names.values())}")
        return _Term(raw, negate, kind, names[arg.lower()])
    if kind == "confidence":
        if arg.lower() not in ("suspected", "evidence"):
            raise QueryError(raw, f"unknown confidence {arg}; use suspected or evidence")
        return _Term(raw, negate, kind, arg.lower())
    if kind == "cause":
        cause = _CAUSES.get(arg.lower())
        if cause is None:
            raise QueryError(
                raw,
                f"unknown cause {arg}; use recompilation, host_op, communication, expected, unexplained, any or none",
            )
        return _Term(raw, negate, kind, cause)
    if kind == "core":
        arg = re.sub(r"[\s-]", "_", arg)
        if arg.lower() == "mix":
            arg = "MIX_*"
    elif kind == "shape":
        arg = "".join(arg.split())
    return _Term(raw, negate, kind, arg)


def _number(raw: str, text: str, *, unit: bool = True) -> float:
    scale = 1.0
    lowered = text.strip().lower()
    for suffix, factor in _UNITS if unit else ():
        if lowered.endswith(suffix):
            lowered, scale = lowered[: -len(suffix)], factor
            break
    try:
        number = float(lowered) * scale
    except ValueError:
        number = math.nan
    if not lowered or not math.isfinite(number):
        if not unit:
            raise QueryError(raw, f"{text!r} is not a number")
        raise QueryError(raw, f"{text!r} is not a number of microseconds (units us, ms, s allowed)")
    return number


_LONG_NEEDLE = 256
"""Needles longer than this are matched against the lowered column: Aho-Corasick's case-
insensitive automaton costs time quadratic in the needle (20,000 characters: 1.4 s on 1,120
names), and a regex of a long needle can pass the engine's size limit."""


def _contains(column: str, needle: str) -> pl.Expr:
    """Case-insensitive substring; Aho-Corasick for short ASCII needles, a regex for other
    short ones, a literal search in the lowered column for long ones (linear in both)."""
    if len(needle) > _LONG_NEEDLE:
        return pl.col(column).str.to_lowercase().str.contains(needle.lower(), literal=True)
    if needle.isascii():
        return pl.col(column).str.contains_any([needle], ascii_case_insensitive=True)
    return pl.col(column).str.contains("(?i)" + re.escape(needle))


def _equals(column: str, value: str) -> pl.Expr:
    """Case-insensitive whole-value match; `*` and `?` are globs (a regex, for values of up to
    _LONG_NEEDLE characters: longer ones compare the lowered column, the globs taken literally)."""
    if len(value) > _LONG_NEEDLE or not any(c in value for c in "*?"):
        return pl.col(column).str.to_lowercase() == value.lower()
    pattern = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in value)
    return pl.col(column).str.contains(f"(?is)^{pattern}$")


def _string_match(kind: str, value: str, column: str) -> pl.Expr:
    if kind in ("text", "name", "dtype"):
        return _contains(column, value)
    if kind == "shape":
        return pl.col(column).str.contains(value, literal=True)
    return _equals(column, value)


class _Distinct:
    """Distinct values of the repetitive string columns of one frame, looked up once per filter.

    Op names, types, task types, shapes and dtypes repeat across steps: matching a few
    thousand distinct values and then testing membership is several times cheaper on
    millions of rows than matching every row.
    """

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame
        self.values: dict[str, pl.Series | None] = {}
        self._own: pl.Expr | None = None

    def match(self, kind: str, value: str, column: str) -> pl.Expr:
        expr = _string_match(kind, value, column)
        if column not in self.values:
            self.values[column] = self._distinct(column)
        distinct = self.values[column]
        if distinct is None:
            return expr
        return pl.col(column).is_in(distinct.to_frame().filter(expr.fill_null(False)).to_series().implode())

    def own_kernel(self) -> pl.Expr:
        """The rows of an application's own kernel (rules.custom_kernel), matched on the
        distinct op types of the core tasks instead of every row."""
        if self._own is None:
            core = pl.col("task_type").is_in(CORE_TASKS).fill_null(False)
            types = self.frame.filter(core)["op_type"].unique().drop_nulls()
            own = types.filter(types.str.contains(CUSTOM_KERNEL_TYPES) & (types != UNKNOWN))
            self._own = (core & pl.col("op_type").is_in(own.implode()).fill_null(False)) if own.len() else pl.lit(False)
        return self._own

    def _distinct(self, column: str) -> pl.Series | None:
        values = self.frame[column]
        return values.unique().drop_nulls() if _repetitive(values) else None


def _repetitive(values: pl.Series) -> bool:
    """A long string column whose evenly spaced sample of 8192 holds at most 1024 distinct values."""
    if values.dtype != pl.String or values.len() < 100_000:
        return False
    return values.gather_every(values.len() // 8192).n_unique() <= 1024


def _expr(term: _Term, columns: tuple[str, ...], distinct: _Distinct) -> pl.Expr:
    kind, v = term.kind, term.value
    if isinstance(v, tuple):
        column, op, number = v
        col = pl.col(column)
        if kind == "rel":  # the number times the mean of the row's op type and task type
            by = [c for c in ("card", *_GROUP_COLUMNS) if c in distinct.frame.columns]
            bound: pl.Expr | float = number * col.mean().over(by)
        else:
            bound = number
        e = {">": col > bound, ">=": col >= bound, "<": col < bound, "<=": col <= bound, "=": col == bound}[op]
    elif isinstance(v, bool):
        own = distinct.own_kernel()
        e = aclnn_tasks(own) if v else aclop_tasks(own)
    elif kind in ("card", "confidence"):
        e = pl.col(columns[0]) == v
    elif kind == "kind":
        e = compute_tasks() if v == "compute" else is_communication() if v == "communication" else _custom(distinct)
    elif kind == "fused" and isinstance(v, str):
        e = pl.lit(_in_sequences(distinct.frame, v))
    elif kind == "cause":
        col = pl.col(columns[0])
        e = col.is_not_null() if v == "any" else col.is_null() if v == "none" else col == v
    else:
        e = distinct.match(kind, v, columns[0])
        for c in columns[1:]:
            e = e | distinct.match(kind, v, c)
    # A null value never matches a term, so a negated term keeps it.
    e = e.fill_null(False)
    return ~e if term.negate else e


def _custom(distinct: _Distinct) -> pl.Expr:
    """Rows of an op type that is an application's own kernel on the row's card (as the rules'
    Cards.custom_types: any core task of the type with a kernel's name)."""
    own = distinct.own_kernel()
    if "card" not in distinct.frame.columns or distinct.frame["card"].n_unique() < 2:
        return own.any().over("op_type")
    return own.any().over("card", "op_type")


def _in_sequences(frame: pl.DataFrame, fused_op: str) -> pl.Series:
    """Whether each row of `frame` is in an occurrence of a sequence `fused_op` does, found
    as the fusible_sequence rule finds them (analysis/fusion.py), per card of the frame."""
    from .fusion import find_sequences
    from .fusion_patterns import PATTERNS

    wanted = [i for i, p in enumerate(PATTERNS) if p.fused_op == fused_op]
    occ = find_sequences(frame.select(_SEQUENCE_COLUMNS).with_row_index("__seq"))
    mine = occ.found.filter(pl.col("pattern").is_in(wanted))
    hit = pl.Series("hit", [False] * frame.height, dtype=pl.Boolean)
    if mine.height:
        at = mine.select(pl.int_ranges("first", pl.col("first") + pl.col("length")).alias("i")).explode("i")["i"]
        hit = hit.scatter(occ.tasks["__seq"].gather(at), True)
    return hit


def _apply(frame: pl.DataFrame, groups: Sequence[Sequence[tuple[_Term, tuple[str, ...]]]]) -> pl.DataFrame:
    """The rows of `frame` matching every term of one of `groups` (no group: every row)."""
    if not any(groups):
        return frame
    have = set(frame.columns)
    for terms in groups:
        for term, columns in terms:
            missing = [c for c in columns if c not in have]
            if missing:
                raise QueryError(term.raw, f"this table has no {missing[0]} column")
    distinct = _Distinct(frame)
    alternatives = [
        pl.all_horizontal([_expr(t, c, distinct) for t, c in terms]) if terms else pl.lit(True) for terms in groups
    ]
    return frame.filter(alternatives[0] if len(alternatives) == 1 else pl.any_horizontal(alternatives))


def _matching(frame: pl.DataFrame, groups: Sequence[Sequence[tuple[_Term, tuple[str, ...]]]]) -> pl.Series:
    """Positions of the rows matching `groups`, filtering only the columns the terms read."""
    if not any(groups):
        return pl.int_range(frame.height, dtype=pl.UInt32, eager=True)
    used = {c for terms in groups for _, columns in terms for c in columns if c in frame.columns}
    if any(t.kind in ("rel", "kind", "fused") for terms in groups for t, _ in terms) and "card" in frame.columns:
        used.add("card")  # the terms that look at the whole table do so per card
    slim = frame.select(sorted(used)).with_row_index("__position")
    return _apply(slim, groups)["__position"]


def _ordered(frame: pl.DataFrame, positions: pl.Series, key: str, descending: bool) -> pl.Series:
    if key not in frame.columns:
        raise ValueError(f"cannot sort by {key!r}: the table has no such column")
    if positions.len() < 2:
        return positions
    # `positions` ascend, so a stable sort keeps equal keys in frame (row) order.
    return positions.gather(_arg_sort(frame[key].gather(positions), descending))


def task_positions(tasks: pl.DataFrame, query: Query, key: str, descending: bool) -> pl.Series:
    """The filtered, sorted view of `tasks` as positions into it (see `filter_tasks`,
    `sort_frame`): one integer column instead of a copy of every column, which is what
    keeps a re-sort of 2M rows interactive. `tasks` must be in row order."""
    positions = _matching(tasks, _task_groups(query))
    return positions if key == "row" else _ordered(tasks, positions, key, descending)


def stats_positions(stats: pl.DataFrame, query: Query, key: str, descending: bool) -> pl.Series:
    """`filter_stats` then `sort_frame`, as positions into `stats`."""
    return _ordered(stats, _matching(stats, _stats_groups(query)), key, descending)


def totals_at(frame: pl.DataFrame, positions: pl.Series) -> tuple[int, float, float]:
    """`totals` of the rows at `positions`, without gathering the frame."""
    if positions.len() == 0:
        return 0, 0.0, 0.0
    sums = frame.select(
        pl.col(c).gather(positions).sum().cast(pl.Float64) if c in frame.columns else pl.lit(0.0, pl.Float64)
        for c in ("duration_us", "wait_us")
    ).row(0)
    return positions.len(), float(sums[0] or 0.0), float(sums[1] or 0.0)


def filter_tasks(tasks: pl.DataFrame, query: Query) -> pl.DataFrame:
    """The tasks matching every term of `query`, in their original order."""
    return _apply(tasks, _task_groups(query))


def filter_stats(stats: pl.DataFrame, query: Query) -> pl.DataFrame:
    """Op statistics matching the terms that make sense there.

    Plain text and `type:` match op_type, `core:`/`task:` match core_type, `card:` matches
    card; every other term (name:, dur, wait, cause:, aclnn, aclop, shape:, dtype:, state:)
    describes single tasks and is ignored here (see `Query.ignored_on_stats`).
    """
    return _apply(stats, _stats_groups(query))


def sort_frame(frame: pl.DataFrame, key: str, descending: bool) -> pl.DataFrame:
    """Sorted by `key`, nulls last either way, equal keys in `row` order (else kept in place)."""
    if key not in frame.columns:
        raise ValueError(f"cannot sort by {key!r}: the table has no such column")
    if frame.height < 2:
        return frame
    # A stable sort on the key alone is several times cheaper than sorting on (key, row) and
    # gives the same order once the rows are in `row` order; filtered tables already are.
    if key == "row" or "row" not in frame.columns or frame["row"].is_sorted():
        idx = _arg_sort(frame[key], descending)
    else:
        order = frame["row"].arg_sort()
        idx = order.gather(_arg_sort(frame[key].gather(order), descending))
    # Gathering every column is most of the cost; a table already in order skips it.
    return frame if idx.is_sorted() else frame[idx]


def _arg_sort(values: pl.Series, descending: bool) -> pl.Series:
    if _repetitive(values):
        # Sorting the distinct values, then the integer codes of an Enum in that order,
        # takes about half the time of sorting millions of strings.
        values = values.cast(pl.Enum(values.unique().drop_nulls().sort()))
    by = pl.arg_sort_by("k", descending=descending, nulls_last=True, maintain_order=True)
    return pl.DataFrame({"k": values}).select(by).to_series()


def totals(frame: pl.DataFrame) -> tuple[int, float, float]:
    """Rows, summed duration_us and summed wait_us; a sum is 0.0 when empty, null or absent."""
    if frame.height == 0:
        return 0, 0.0, 0.0
    sums = frame.select(
        pl.col(c).sum().cast(pl.Float64) if c in frame.columns else pl.lit(0.0, pl.Float64)
        for c in ("duration_us", "wait_us")
    ).row(0)
    return frame.height, float(sums[0] or 0.0), float(sums[1] or 0.0)
