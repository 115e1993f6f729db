"""The tests. A package, so that `tests.builders` imports from any test module: pytest puts the folder above
it (the repository root) first on sys.path when it imports tests/conftest.py."""
