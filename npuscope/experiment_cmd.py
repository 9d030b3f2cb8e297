"""`npuscope experiment RUN`: capture RUN again with a change and measure it."""

from __future__ import annotations

import argparse


def add_experiment_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("experiment", help="capture a run again with a change and measure it")


def run_experiment(args: argparse.Namespace) -> int:
    raise NotImplementedError
