"""decision package."""
