"""The flow document the designer edits, its undo commands and its autosave."""
