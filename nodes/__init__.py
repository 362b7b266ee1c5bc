"""Switchboard's built-in node packages, one folder per domain. Each
registers through the ``switchboard.nodes`` entry point like any third-party
package."""
