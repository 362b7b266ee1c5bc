"""What an import of a Node-RED export comes to: the flow, and per
Node-RED type how many of its nodes were mapped, mapped with review, or made
placeholders (``ImportReport``, ``format_table``); and the error a file that
cannot be imported gives (``NodeRedImportError``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..flow.model import Flow
from .node_red_base import MAPPED, PLACEHOLDER, REVIEW


class NodeRedImportError(ValueError):
    """A file that is not a Node-RED export this importer can read; the
    message names what is wrong and where."""


@dataclass
class ImportReport:
    flow: Flow
    #: Node-RED type -> Counter of status (mapped / review / placeholder).
    table: dict[str, Counter] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    entries: int = 0
    #: Node-RED entry id -> where it went: ``node ID`` (the flow's node),
    #: ``subflows.NAME/ID`` (a node of definition NAME), ``subflow NAME``
    #: (a definition), ``wires`` (a link or junction), ``placeholder ID``,
    #: ``flow`` (a tab: its nodes are the flow's), ``notes`` (a group,
    #: comment or config node: the flow's description and the nodes' notes).
    where: dict[str, str] = field(default_factory=dict)

    def total(self) -> int:
        return sum(sum(c.values()) for c in self.table.values())


def format_table(report: ImportReport) -> str:
    rows = sorted(report.table.items())
    width = max([len("Node-RED type")] + [len(t) for t, _ in rows])
    head = f"{'Node-RED type':<{width}}  {'mapped':>6}  {'review':>6}  {'placeholder':>11}"
    lines = [head, "-" * len(head)]
    tot: Counter = Counter()
    for t, counts in rows:
        tot.update(counts)
        lines.append(f"{t:<{width}}  {counts[MAPPED]:>6}  {counts[REVIEW]:>6}  "
                     f"{counts[PLACEHOLDER]:>11}")
    lines.append("-" * len(head))
    lines.append(f"{'total (' + str(report.total()) + ')':<{width}}  {tot[MAPPED]:>6}  "
                 f"{tot[REVIEW]:>6}  {tot[PLACEHOLDER]:>11}")
    return "\n".join(lines)
