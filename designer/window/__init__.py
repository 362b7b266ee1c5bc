"""The designer's main window: it puts the canvas, the panels and the run session together."""
