"""Importers: flows of other tools turned into Switchboard flows.

``node_red``: a Node-RED export (``switchboard import node-red FLOWS.json``,
the designer's File > Import > Node-RED Flow...). See docs/import-node-red.md.
"""

from .node_red import import_node_red, read_node_red
from .node_red_report import ImportReport, NodeRedImportError, format_table

__all__ = ["ImportReport", "NodeRedImportError", "format_table", "import_node_red",
           "read_node_red"]
