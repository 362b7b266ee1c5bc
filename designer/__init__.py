"""The PySide6 designer: a view over runtime.flow, never a second model."""
