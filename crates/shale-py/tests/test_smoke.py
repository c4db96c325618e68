def test_import():
    import shaledb
    assert shaledb.__leveldb_version__ == "1.23"
