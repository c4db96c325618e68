"""Runs tests/typed_usage.py, the program scripts/test-python type-checks
with mypy against the stubs: what the stubs promise, the module does."""

import typed_usage


def test_typed_usage_runs(tmp_path):
    typed_usage.main(str(tmp_path))
