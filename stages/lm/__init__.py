"""lm package."""
