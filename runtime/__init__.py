"""Switchboard's headless runtime: node API, flow files, engine, events.

Nothing below this package imports Qt; the designer is a view over it.
"""

__version__ = "0.1.0"
