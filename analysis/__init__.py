"""Diagnosis engine: findings with evidence and advice, and a cause for every long wait.

Textual-free: the headless `report` command and the explorer both call `diagnose`.
"""

from .diagnose import Diagnosis, diagnose
from .findings import Finding
from .thresholds import Thresholds

__all__ = ["Diagnosis", "Finding", "Thresholds", "diagnose"]
