"""browser nodes (being written)."""
