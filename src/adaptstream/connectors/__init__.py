"""connectors family."""
