"""metrics family."""
