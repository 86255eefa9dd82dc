"""The package version (one place; read by pyproject and the rule cache key)."""
__version__ = "0.1.0"
