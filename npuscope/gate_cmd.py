"""`npuscope gate NEW --baseline @NAME|PATH --budgets FILE`: budgets for CI."""

from __future__ import annotations

import argparse


def add_gate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("gate", help="check a run against budgets")


def run_gate(args: argparse.Namespace) -> int:
    raise NotImplementedError
