"""``switchboard import node-red FLOWS.json [-o FILE] [--force]``: a Node-RED
export turned into a Switchboard flow file (runtime.importers), with a table
of what became of each Node-RED type: mapped, mapped but to review, or a
placeholder that blocks the run until it is replaced."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .base import EXIT_OK, UsageError, _Parser

IMPORT_EPILOG = """Every Node-RED node is imported: as its Switchboard node, as one to review
(its notes say what to look at), or as a placeholder naming its Node-RED type,
which blocks the run (exit 2) until it is replaced. Subflows become subflows
(their env properties their params); groups and comments are kept as notes.
See docs/import-node-red.md."""


def _add_import_parser(sub: Any) -> None:
    i = sub.add_parser("import", help="turn another tool's flow into a Switchboard flow")
    isub = i.add_subparsers(dest="import_command", required=True, parser_class=_Parser,
                            metavar="node-red")
    nr = isub.add_parser("node-red", help="import a Node-RED export (flows.json)",
                         epilog=IMPORT_EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    nr.add_argument("flows", metavar="FLOWS.json", help="a Node-RED export (a JSON array)")
    nr.add_argument("-o", "--output", metavar="FILE",
                    help="the flow file to write (default: FLOWS stem + .flow.json beside it)")
    nr.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def default_output(flows: str) -> Path:
    p = Path(flows)
    stem = p.name.removesuffix(".json") if p.name.endswith(".json") else p.stem
    return p.with_name(stem + ".flow.json")


def _import(args: argparse.Namespace) -> int:
    from runtime.importers import NodeRedImportError, format_table, read_node_red

    out = Path(args.output) if args.output else default_output(args.flows)
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists; give --force to overwrite it, or -o another file")
    try:
        report = read_node_red(args.flows)
    except NodeRedImportError as exc:
        raise UsageError(str(exc)) from None
    text = report.flow.dumps()
    try:
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write: {exc.strerror or exc}") from None
    print(format_table(report))
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    review = sum(c["review"] for c in report.table.values())
    held = sum(c["placeholder"] for c in report.table.values())
    subflows = len(report.flow.subflows)
    print(f"wrote {out} ({len(report.flow.nodes)} nodes, {len(report.flow.wires)} wires"
          + (f", {subflows} subflow{'s' * (subflows != 1)}" if subflows else "") + ")")
    if held:
        print(f"{held} placeholder(s): the flow does not run until they are replaced")
    if review:
        print(f"{review} to review: see each node's notes")
    return EXIT_OK
