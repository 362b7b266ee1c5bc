"""http nodes (being written)."""
