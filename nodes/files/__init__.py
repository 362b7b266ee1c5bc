"""files nodes (being written)."""
