"""`npuscope runs` and `npuscope baseline`: the runs registry and its named baselines."""

from __future__ import annotations

import argparse


def add_runs_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("runs", help="the runs recorded so far")
    sub.add_parser("baseline", help="named baselines")


def run_runs(args: argparse.Namespace) -> int:
    raise NotImplementedError


def run_baseline(args: argparse.Namespace) -> int:
    raise NotImplementedError
