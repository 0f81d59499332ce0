"""Layer package."""
