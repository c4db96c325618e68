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


def required():
    """Whether tests that need something of their machine must run: the
    workspace's one rule, SHALE_REQUIRE_ALL=1 exactly (scripts/test sets it
    when CI is set), read as shale_compact::testing reads it."""
    return os.environ.get("SHALE_REQUIRE_ALL") == "1"


def skip(missing, provide):
    """Fails naming what is missing and how to provide it when required();
    otherwise skips, saying why."""
    if required():
        pytest.fail(f"cannot run: {missing}; SHALE_REQUIRE_ALL=1 requires it ({provide})")
    pytest.skip(f"{missing} ({provide}; SHALE_REQUIRE_ALL=1 makes this fail)")


@pytest.fixture
def plyvel():
    """Debian's python3-plyvel (real LevelDB 1.23). Skips when it is not
    installed, unless required()."""
    try:
        import plyvel as module
    except ImportError:
        skip("plyvel is not installed", "apt-get install python3-plyvel")
    return module
