"""DB: open options, get/put/delete, properties, sizes, closing rules,
module functions and exceptions."""

import array
import os
import random

import pytest

import shaledb


def test_module_attributes():
    assert shaledb.__leveldb_version__ == "1.23"
    assert isinstance(shaledb.__version__, str) and shaledb.__version__
    assert issubclass(shaledb.IOError, shaledb.Error)
    assert issubclass(shaledb.IOError, OSError)
    assert issubclass(shaledb.CorruptionError, shaledb.Error)
    assert issubclass(shaledb.IteratorInvalidError, shaledb.Error)
    assert issubclass(shaledb.Error, Exception)


def test_put_get_delete(db):
    assert db.get(b"missing") is None
    assert db.get(b"missing", b"default") == b"default"
    db.put(b"key", b"value")
    assert db.get(b"key") == b"value"
    assert b"key" in db and b"missing" not in db
    db.put(b"key", b"other", sync=True)
    assert db.get(b"key", verify_checksums=True, fill_cache=False) == b"other"
    db.delete(b"key")
    assert db.get(b"key") is None
    db.delete(b"never-there", sync=True)
    db.put(b"", b"empty key")
    assert db.get(b"") == b"empty key"
    db.put(b"empty value", b"")
    assert db.get(b"empty value") == b""


def test_bytes_like_keys_and_values(db):
    db.put(bytearray(b"ba"), memoryview(b"mv"))
    assert db.get(b"ba") == b"mv"
    assert db.get(memoryview(b"ba")) == b"mv"
    db.put(b"arr", array.array("B", [1, 2, 3]))
    assert db.get(b"arr") == b"\x01\x02\x03"
    db.delete(bytearray(b"ba"))
    assert db.get(b"ba") is None
    assert isinstance(db.get(b"arr"), bytes)


@pytest.mark.parametrize("bad", ["text", 1, 1.5, None, object()])
def test_non_bytes_is_type_error(db, bad):
    with pytest.raises(TypeError):
        db.put(bad, b"v")
    with pytest.raises(TypeError):
        db.get(bad)
    with pytest.raises(TypeError):
        db.delete(bad)
    if bad is not None:
        with pytest.raises(TypeError):
            db.put(b"k", bad)


def test_keyword_only_arguments(db):
    with pytest.raises(TypeError):
        db.put(b"k", b"v", True)
    with pytest.raises(TypeError):
        db.iterator(True)


def test_open_rules(tmp_path):
    path = str(tmp_path / "db")
    with pytest.raises(shaledb.Error):
        shaledb.DB(path)  # create_if_missing is False
    db = shaledb.DB(path, create_if_missing=True)
    # Held by this handle: a second open fails, as LevelDB's LOCK does.
    with pytest.raises(shaledb.IOError):
        shaledb.DB(path)
    db.close()
    with pytest.raises(shaledb.Error):
        shaledb.DB(path, error_if_exists=True)
    shaledb.DB(path).close()


def test_name_and_closed(db_path):
    db = shaledb.DB(db_path, create_if_missing=True)
    assert db.name == db_path
    assert not db.closed
    with pytest.raises(AttributeError):
        db.name = "other"
    assert "shaledb.DB" in repr(db)
    db.close()
    assert db.closed
    db.close()  # twice is fine
    assert "closed" in repr(db)


def test_bytes_and_pathlike_names(tmp_path):
    with shaledb.DB(os.fsencode(tmp_path / "a"), create_if_missing=True) as db:
        db.put(b"k", b"v")
    with shaledb.DB(tmp_path / "a") as db:
        assert db.get(b"k") == b"v"
    with pytest.raises(TypeError):
        shaledb.DB(12, create_if_missing=True)


def test_plyvel_options(tmp_path):
    db = shaledb.DB(
        str(tmp_path / "db"),
        create_if_missing=True,
        error_if_exists=True,
        paranoid_checks=True,
        write_buffer_size=64 * 1024,
        max_open_files=100,
        lru_cache_size=1 << 20,
        block_size=1024,
        block_restart_interval=8,
        max_file_size=256 * 1024,
        compression=None,
        bloom_filter_bits=10,
        comparator=None,
        comparator_name=None,
    )
    for i in range(2000):
        db.put(b"%06d" % i, b"x" * 100)
    assert db.get(b"001999") == b"x" * 100
    db.close()
    for compression in ("snappy", b"snappy", None):
        shaledb.DB(str(tmp_path / "db"), compression=compression, bloom_filter_bits=0).close()


def test_bad_options(db_path):
    with pytest.raises(ValueError):
        shaledb.DB(db_path, create_if_missing=True, compression="zlib")
    with pytest.raises(TypeError):
        shaledb.DB(db_path, create_if_missing=True, compression=1)
    with pytest.raises(TypeError):
        shaledb.DB(db_path, create_if_missing=True, no_such_option=1)
    with pytest.raises(TypeError):
        shaledb.DB(db_path, create_if_missing=1)
    with pytest.raises(OverflowError):
        shaledb.DB(db_path, create_if_missing=True, write_buffer_size=-1)
    # Values the engine refuses.
    with pytest.raises(shaledb.Error):
        shaledb.DB(db_path, create_if_missing=True, block_size=0)
    with pytest.raises(shaledb.Error):
        shaledb.DB(db_path, create_if_missing=True, compaction_executor="nope")


def test_shaledb_extras(tmp_path):
    with shaledb.DB(
        str(tmp_path / "db"),
        create_if_missing=True,
        compaction_executor="streaming",
        max_background_compactions=2,
        compaction_threads=2,
        compaction_nice=0,
        l0_compaction_trigger=2,
        l0_slowdown_writes_trigger=4,
        l0_stop_writes_trigger=8,
        max_bytes_for_level_base=1 << 20,
        level_multiplier=10.0,
        seek_compaction=False,
        write_buffer_size=32 * 1024,
    ) as db:
        # Overlapping tables (keys in random order, twice) so compactions
        # merge instead of moving files.
        order = list(range(3000))
        for _ in range(2):
            random.Random(1).shuffle(order)
            for i in order:
                db.put(b"%06d" % i, b"v" * 64)
        db.compact_range()
        stats = db.stats()
    assert [level["level"] for level in stats["levels"]] == list(range(7))
    assert sum(level["files"] for level in stats["levels"]) > 0
    assert sum(level["bytes"] for level in stats["levels"]) > 0
    assert sum(level["compactions"] for level in stats["levels"]) > 0
    streaming = stats["executors"]["streaming"]
    assert streaming["jobs"] > 0 and streaming["bytes_read"] > 0
    assert streaming["seconds"] >= 0
    assert stats["fallbacks"] == {"jobs": 0, "last_reason": None}
    scheduler = stats["scheduler"]
    assert scheduler["queue_lengths"] == [0] * 7 and scheduler["running"] == 0
    assert scheduler["completed"] > 0
    assert scheduler["executor_bytes_per_second"]["streaming"] > 0
    stalls = stats["stalls"]
    assert set(stalls) == {"slowdown_count", "slowdown_seconds", "stop_count", "stop_seconds", "causes"}
    causes = stalls["causes"]
    assert set(causes) == {"l0_slowdown", "l0_stop", "flush_slowdown", "memtable_flush"}
    assert causes["l0_slowdown"]["count"] + causes["flush_slowdown"]["count"] == stalls["slowdown_count"]
    assert causes["l0_stop"]["count"] + causes["memtable_flush"]["count"] == stalls["stop_count"]


def _shale_binary():
    """The `shale` command the workspace built (SHALE_BIN, or the debug
    build under CARGO_TARGET_DIR or the workspace's target/)."""
    if os.environ.get("SHALE_BIN"):
        return os.environ["SHALE_BIN"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target")
    return os.path.join(target, "debug", "shale")


def test_stats_is_the_document_shale_stats_json_prints(db_path):
    """One schema: Python's stats() and `shale stats --json` give the same
    document for the same database (both opened afresh, so the counters
    since open are zero on both sides; the levels are the database's)."""
    import json
    import subprocess

    from conftest import skip

    shale = _shale_binary()
    if not os.access(shale, os.X_OK):
        skip(f"{shale} is not built", "cargo build -p shale-cli, or set SHALE_BIN")
    with shaledb.DB(db_path, create_if_missing=True, write_buffer_size=32 * 1024) as db:
        for i in range(2000):
            db.put(b"%06d" % i, b"v" * 64)
        # Nothing left to compact: the next open starts no job.
        db.compact_range()
    with shaledb.DB(db_path) as db:
        # Read-only, so it works while this handle holds the database.
        printed = subprocess.run(
            [shale, "stats", "--json", "--db", db_path],
            check=True, capture_output=True, text=True,
        ).stdout
        ours = db.stats()
    theirs = json.loads(printed)
    assert theirs == ours
    assert sum(level["files"] for level in ours["levels"]) > 0
    assert set(ours) == {"levels", "executors", "fallbacks", "scheduler", "stalls", "writes"}


def test_get_property(db):
    for i in range(100):
        db.put(b"%03d" % i, b"v")
    db.compact_range()
    assert b"Level" in db.get_property(b"leveldb.stats")
    assert db.get_property(b"shale.stats") == db.get_property(b"leveldb.stats")
    files = sum(int(db.get_property(b"leveldb.num-files-at-level%d" % level)) for level in range(7))
    assert files >= 1
    assert b"level 0" in db.get_property(b"leveldb.sstables")
    db.put(b"in the memtable", b"v")
    assert int(db.get_property(b"leveldb.approximate-memory-usage")) > 0
    assert db.get_property("leveldb.stats") is not None  # str is accepted too
    assert db.get_property(b"leveldb.no-such-property") is None
    assert db.get_property(b"nonsense") is None
    with pytest.raises(TypeError):
        db.get_property(1)


def test_compact_range_on_a_chosen_executor(tmp_path):
    # Several L0 tables and no background compaction: the only jobs are
    # the manual ones.
    with shaledb.DB(str(tmp_path / "db"), create_if_missing=True,
                    compaction_executor="streaming", write_buffer_size=64 * 1024,
                    l0_compaction_trigger=100, l0_slowdown_writes_trigger=100,
                    l0_stop_writes_trigger=100) as db:
        for i in range(3000):
            db.put(b"k%05d" % ((i * 7919) % 3000), b"v" * 100)
        db.compact_range(executor="parallel")
        executors = db.stats()["executors"]
        assert executors["parallel"]["jobs"] > 0
        assert "streaming" not in executors
        db.compact_range(start=b"k00010", stop=b"k00020", executor=None)
        db.compact_range(executor="auto")
        with pytest.raises(shaledb.Error, match="no remote workers"):
            db.compact_range(executor="remote")
        with pytest.raises(shaledb.Error, match="unknown compaction executor"):
            db.compact_range(executor="gpu")
        with pytest.raises(TypeError):
            db.compact_range(executor=b"parallel")
        assert db.get(b"k02999") == b"v" * 100


def test_compact_range_and_sizes(db):
    for i in range(2000):
        db.put(b"k%05d" % i, os.urandom(1000))
    db.compact_range(start=b"k00000", stop=b"k00999")
    db.compact_range(start=None, stop=None)
    db.compact_range()
    assert len(db.get(b"k01234")) == 1000
    whole = db.approximate_size(b"k", b"l")
    assert whole > 1000 * 1000
    half, nothing = db.approximate_sizes((b"k", b"k01000"), (b"x", b"y"))
    assert 0 < half < whole
    assert nothing == 0
    assert db.approximate_sizes() == []
    with pytest.raises(TypeError):
        db.approximate_sizes((b"a",))
    with pytest.raises(TypeError):
        db.approximate_size("a", b"b")
    with pytest.raises(TypeError):
        db.compact_range(start="a")


def test_closed_database_raises(db_path):
    db = shaledb.DB(db_path, create_if_missing=True)
    db.put(b"k", b"v")
    snapshot = db.snapshot()
    batch = db.write_batch()
    prefixed = db.prefixed_db(b"p")
    db.close()
    calls = [
        lambda: db.get(b"k"),
        lambda: db.put(b"k", b"v"),
        lambda: db.delete(b"k"),
        lambda: b"k" in db,
        lambda: db.write_batch(),
        lambda: db.iterator(),
        lambda: iter(db),
        lambda: db.raw_iterator(),
        lambda: db.snapshot(),
        lambda: db.get_property(b"leveldb.stats"),
        lambda: db.compact_range(),
        lambda: db.approximate_size(b"a", b"b"),
        lambda: db.approximate_sizes((b"a", b"b")),
        lambda: db.stats(),
        lambda: snapshot.get(b"k"),
        lambda: snapshot.iterator(),
        lambda: snapshot.raw_iterator(),
        lambda: batch.put(b"k", b"v"),
        lambda: batch.write(),
        lambda: prefixed.get(b"k"),
        lambda: prefixed.put(b"k", b"v"),
        lambda: prefixed.iterator(),
        lambda: prefixed.snapshot(),
    ]
    for call in calls:
        with pytest.raises(RuntimeError):
            call()
    snapshot.close()  # fine after the database closed


def test_reopen_after_close_keeps_data(db_path):
    with shaledb.DB(db_path, create_if_missing=True) as db:
        for i in range(500):
            db.put(b"%04d" % i, b"%d" % i)
    with shaledb.DB(db_path) as db:
        assert db.get(b"0499") == b"499"
        assert len(list(db)) == 500


def test_destroy_db(db_path):
    db = shaledb.DB(db_path, create_if_missing=True)
    db.put(b"k", b"v")
    with pytest.raises(shaledb.IOError):
        shaledb.destroy_db(db_path)  # open
    db.close()
    shaledb.destroy_db(db_path)
    assert not os.path.exists(db_path)
    shaledb.destroy_db(db_path)  # missing: fine
    with pytest.raises(TypeError):
        shaledb.destroy_db(3)


def test_repair_db_rebuilds_a_lost_manifest(db_path):
    with shaledb.DB(db_path, create_if_missing=True) as db:
        for i in range(1000):
            db.put(b"%04d" % i, b"value-%d" % i)
        db.compact_range()
        db.put(b"unflushed", b"in the log")
    for name in os.listdir(db_path):
        if name.startswith("MANIFEST-") or name == "CURRENT":
            os.remove(os.path.join(db_path, name))
    with pytest.raises(shaledb.Error):
        shaledb.DB(db_path)
    assert shaledb.repair_db(db_path, block_size=1024) is None
    with shaledb.DB(db_path) as db:
        assert db.get(b"0042") == b"value-42"
        assert db.get(b"unflushed") == b"in the log"
        assert len(list(db)) == 1001
    # The converted log went to lost/.
    assert any(name.endswith(".log") for name in os.listdir(os.path.join(db_path, "lost")))


def test_repair_db_errors(db_path):
    with pytest.raises(shaledb.Error, match="nothing to repair"):
        shaledb.repair_db(db_path)
    assert not os.path.exists(db_path)
    db = shaledb.DB(db_path, create_if_missing=True)
    with pytest.raises(shaledb.IOError):
        shaledb.repair_db(db_path)  # open
    db.close()
    shaledb.repair_db(db_path)
    with pytest.raises(TypeError):
        shaledb.repair_db(db_path, no_such_option=True)
    with pytest.raises(TypeError):
        shaledb.repair_db(3)


def test_corruption_error(db_path):
    with shaledb.DB(db_path, create_if_missing=True, compression=None) as db:
        for i in range(1000):
            db.put(b"%04d" % i, b"value-%d" % i * 10)
        db.compact_range()
    tables = [name for name in os.listdir(db_path) if name.endswith(".ldb")]
    assert tables
    for name in tables:
        path = os.path.join(db_path, name)
        with open(path, "r+b") as f:
            f.seek(100)
            byte = f.read(1)
            f.seek(100)
            f.write(bytes([byte[0] ^ 0xFF]))
    with shaledb.DB(db_path) as db:
        with pytest.raises(shaledb.CorruptionError):
            db.get(b"0000", verify_checksums=True)
        with pytest.raises(shaledb.CorruptionError):
            list(db.iterator(verify_checksums=True))
        it = db.raw_iterator(verify_checksums=True)
        with pytest.raises(shaledb.CorruptionError):
            it.seek_to_first()


def test_remote_worker_options_and_fallback(tmp_path):
    # Nothing listens on port 1 of loopback: every job the remote executor
    # is given falls back to a local one, and nothing is lost.
    path = str(tmp_path / "db")
    with shaledb.DB(
        path,
        create_if_missing=True,
        compaction_executor="remote",
        remote_workers=["127.0.0.1:1"],
        remote_mode="keys-only",
        remote_timeout=5.0,
        remote_token="t0ken",
        write_buffer_size=32 * 1024,
    ) as db:
        # Overlapping tables, so that compactions merge.
        order = list(range(3000))
        for _ in range(2):
            random.Random(2).shuffle(order)
            for i in order:
                db.put(b"%06d" % i, b"v" * 64)
        db.compact_range()
        stats = db.stats()
        assert stats["fallbacks"]["jobs"] > 0
        assert "127.0.0.1:1" in stats["fallbacks"]["last_reason"]
        assert all(db.get(b"%06d" % i) == b"v" * 64 for i in range(3000))
    for bad in (
        dict(remote_mode="sideways", remote_workers=["127.0.0.1:1"]),
        dict(remote_timeout=0.0, remote_workers=["127.0.0.1:1"]),
    ):
        with pytest.raises(ValueError):
            shaledb.DB(path, **bad)
    with pytest.raises(shaledb.Error, match="remote_workers"):
        shaledb.DB(path, compaction_executor="remote")
    with pytest.raises(TypeError):
        shaledb.DB(path, remote_workers="127.0.0.1:1")
