"""common package."""
