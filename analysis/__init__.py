"""Diagnosis engine: findings with evidence and advice, and a cause for every long wait.

Textual-free: the headless commands and the explorer analyse a profile through one entry,
analysis/session.py (`diagnosed`, then `with_views`; `analyse` for both), over `diagnose`.
"""

from .diagnose import Diagnosis, diagnose
from .findings import Finding
from .thresholds import Thresholds

__all__ = ["Diagnosis", "Finding", "Thresholds", "diagnose"]
