"""`npuscope nodes check NODES.toml`: per node of a nodes file, whether it can analyse its
ranks for this machine: reachable over SSH, npuscope and Dask versions (the same code as
here), cores, rank folders found in each folder, free disk for its cache. Nothing is
started on the nodes: one SSH command each (capture/dask_engine.NodeEngine.read_facts).
Exit 0 when every node can work, 1 when one cannot, 2 on a bad nodes file."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from npuscope.capture.dask_engine import NodeEngine
from npuscope.parsers.nodes_file import read_nodes_file
from npuscope.text import printable


def run_nodes(args: argparse.Namespace) -> int:
    nodes = read_nodes_file(args.nodes_file)
    engine = NodeEngine(nodes, accept_new_host_key=args.accept_new_host_key)
    engine.read_facts()
    rows: list[dict[str, Any]] = []
    for state in engine.states.values():
        facts = {k: v for k, v in state.facts.items() if k != "error"}
        folders = facts.pop("folders", {})
        problem = state.problem
        if problem is None:
            errors = [f"{f}: {v['error']}" for f, v in folders.items() if v.get("error")]
            problem = f"node {state.node.name}: {errors[0]}" if errors else None
        rows.append({"name": state.node.name, "host": state.node.host, "problem": problem, "folders": folders, **facts})
    if args.format == "json":
        doc = {"schema": "npuscope.nodes/1", "path": str(nodes.path), "nodes": rows}
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        for row in rows:
            print(printable(_line(row)))
    return 1 if any(r["problem"] for r in rows) else 0


def _line(row: dict[str, Any]) -> str:
    name = row["name"]
    if row["problem"]:
        return f"{name}  FAILED  {row['problem'].removeprefix(f'node {name}: ')}"
    parts = [
        f"npuscope {row.get('npuscope')} (code {row.get('code')})",
        f"Dask {row.get('dask')}",
        f"Python {row.get('python')}",
        f"{row.get('cpus')} cores",
    ]
    parts += [f"{folder}: {info.get('ranks', 0)} ranks" for folder, info in row["folders"].items()]
    free = row.get("cache_free_bytes")
    if row.get("cache"):
        parts.append(
            f"cache {row['cache']}: " + (f"{free / 1e9:,.1f} GB free" if free is not None else "free disk unknown")
        )
    return f"{name}  ok  " + "; ".join(parts)
