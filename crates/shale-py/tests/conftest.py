"""Fixtures shared by the shaledb tests."""

import os

import pytest

import shaledb


@pytest.fixture
def db_path(tmp_path):
    """A directory name for a new database."""
    return str(tmp_path / "db")


@pytest.fixture
def db(db_path):
    """An open, empty database, closed after the test."""
    database = shaledb.DB(db_path, create_if_missing=True)
    yield database
    database.close()


@pytest.fixture
def plyvel():
    """Debian's python3-plyvel (real LevelDB 1.23). Skips when it is not
    installed, except in CI (SHALEDB_REQUIRE_PLYVEL set), where that fails."""
    try:
        import plyvel as module
    except ImportError:
        if os.environ.get("SHALEDB_REQUIRE_PLYVEL"):
            pytest.fail("plyvel is required (apt-get install python3-plyvel)")
        pytest.skip("plyvel is not installed (apt-get install python3-plyvel)")
    return module
