"""File and table nodes: read, write, list, move and delete files
(category Files), CSV and Excel rows (category Tables).

Every path is resolved against the node's base folder by
``nodes.files.paths``; a path from the AI can never leave it. openpyxl is
imported only when a workbook is opened, so importing this package (the
designer's palette does) stays cheap."""

from . import csv_nodes, excel_nodes, file_nodes  # noqa: F401
