"""admission family."""
