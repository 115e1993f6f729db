"""The package's version, a leaf every part may read (the root package re-exports it)."""

__version__ = "0.1.0"
