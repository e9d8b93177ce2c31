"""spark family."""
