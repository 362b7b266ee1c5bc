"""triggers nodes (being written)."""
