"""One profile's analysis as one value: its diagnosis, its training views and every finding.

The commands, compare, SQL and the explorer all analyse an opened profile the same way, in
two stages, each a new frozen value:

1. `diagnosed(profile, options)`: the wait causes and the operator findings
   (analysis/diagnose.py), from the profile and what the parsers read beside its files
   (parsers/capture_extras.py). The explorer shows these while the views are read.
2. `Diagnosed.with_views(views)`, an `Analysis`: the training-level findings of the views
   (`read_views`, through parsers/views_cache.py; analysis/training_rules.py) and, on a rank
   of a cluster, the cluster's findings on that rank (analysis/cluster.py `rank_findings`),
   merged with the operator findings in display order.

`analyse(profile, options)` runs both. Opening the profile is the caller's (npuscope/loading.py,
tui/load_job.py); `Diagnosed.of` takes a diagnosis made there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from npuscope.parsers import FrameCache, Profile
from npuscope.parsers.capture_extras import capture_extras
from npuscope.parsers.training import TrainingViews
from npuscope.parsers.views_cache import cached_training_views

from .cluster import ClusterSummary, rank_findings
from .diagnose import Diagnosis, diagnose
from .findings import Finding
from .thresholds import Thresholds
from .training_rules import training_findings


@dataclass(frozen=True)
class Options:
    """How a profile is analysed. The caches are the caller's (it flushes them and says their
    problems); None reads and derives everything every time."""

    thresholds: Thresholds = field(default_factory=Thresholds)
    cards: tuple[str, ...] | None = None  # the cards diagnosed; None: every card
    strict: bool = False  # a damaged file of the views raises ProfileError, else it is a note
    cache: FrameCache | None = None  # the diagnosis' wait causes and findings
    views_cache: FrameCache | None = None  # the training views
    cluster: ClusterSummary | None = None  # the cluster the profile is rank `rank` of
    rank: str | None = None

    def __post_init__(self) -> None:
        if (self.cluster is None) != (self.rank is None):
            raise ValueError("a rank of a cluster needs both `cluster` and `rank`")


@dataclass(frozen=True)
class Diagnosed:
    """The first stage: a profile's tasks with their wait causes and its operator findings
    (`diagnosis`), the training views not read yet."""

    profile: Profile
    options: Options
    diagnosis: Diagnosis

    @classmethod
    def of(cls, profile: Profile, diagnosis: Diagnosis, options: Options | None = None) -> Diagnosed:
        """The first stage from a diagnosis of `profile` made elsewhere (its thresholds and
        cards replace those of `options`)."""
        opts = replace(options or Options(), thresholds=diagnosis.thresholds, cards=diagnosis.cards)
        return cls(profile, opts, diagnosis)

    def with_views(self, views: TrainingViews) -> Analysis:
        """The second stage: the training-level findings of `views` and, on a rank of a
        cluster, the cluster's on it, beside the operator findings. Nothing is read."""
        profile, opts, operators = self.profile, self.options, self.diagnosis
        extra = training_findings(profile, operators, views, operators.thresholds)
        if opts.cluster is not None and opts.rank is not None:
            # The rank's folder is checked: a profile opened from elsewhere gets none of them.
            extra = rank_findings(opts.cluster, opts.rank, extra, profile.cards, profile.path)
        return Analysis(profile, opts, operators, views, operators.with_findings(extra))


@dataclass(frozen=True)
class Analysis:
    """The whole analysis of a profile: `operators` as the first stage left it, the training
    `views`, and `diagnosis`: the operators' with every finding (`findings`), what reports,
    traces, SQL and the explorer show."""

    profile: Profile
    options: Options
    operators: Diagnosis
    views: TrainingViews
    diagnosis: Diagnosis

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.diagnosis.findings


def diagnosed(profile: Profile, options: Options | None = None) -> Diagnosed:
    """The first stage: wait causes and operator findings of the cards `options` names."""
    opts = options or Options()
    diagnosis = diagnose(profile, opts.thresholds, opts.cards, cache=opts.cache, extras=capture_extras(profile))
    return Diagnosed(profile, opts, diagnosis)


def read_views(profile: Profile, options: Options | None = None) -> TrainingViews:
    """The training-level views of `profile` (parsers/training.py), through the views cache."""
    opts = options or Options()
    cache = opts.views_cache if opts.views_cache is not None else FrameCache(enabled=False)
    return cached_training_views(profile, cache, strict=opts.strict)


def analyse(profile: Profile, options: Options | None = None, views: TrainingViews | None = None) -> Analysis:
    """Both stages; `views` when the caller has read them, else read here."""
    first = diagnosed(profile, options)
    return first.with_views(views if views is not None else read_views(profile, first.options))
