"""Custom comparators, as plyvel takes them: a Python callable and a name.
The keys follow its order everywhere (gets, iterators, bounds, flushes,
compactions, reopen); the name guards the database; databases written by
real LevelDB (plyvel) with the same comparator are read and written, and
the other way round; only the streaming executor compacts them."""

import os
import subprocess
import sys
import threading

import pytest

import shaledb


def reverse(a, b):
    """Reverse bytewise order, plyvel's documentation example."""
    return (a < b) - (a > b)


REVERSE = dict(comparator=reverse, comparator_name=b"ReverseComparator")


def small(**extra):
    """Small buffers and tables: flushes and compactions of every level."""
    return dict(create_if_missing=True, write_buffer_size=16 * 1024,
                max_file_size=8 * 1024, max_bytes_for_level_base=64 * 1024,
                block_size=512, **extra)


def fill(db, n=4000):
    expected = {}
    for i in range(n):
        key = b"k%05d" % ((i * 7919) % n)
        value = b"v%d-" % i + b"x" * (i % 50)
        db.put(key, value)
        expected[key] = value
    for i in range(0, n, 7):
        key = b"k%05d" % i
        db.delete(key)
        expected.pop(key, None)
    return expected


def test_keys_follow_the_comparator_through_compactions(db_path):
    with shaledb.DB(db_path, **small(**REVERSE)) as db:
        expected = fill(db)
        db.compact_range()
        in_order = sorted(expected.items(), reverse=True)
        assert list(db) == in_order
        assert list(db.iterator(reverse=True)) == in_order[::-1]
        assert db.get(b"k00010") == expected[b"k00010"]
        assert db.get(b"k00007") is None
        # Bounds in the comparator's order: start is the larger key.
        got = list(db.iterator(start=b"k00200", stop=b"k00100", include_value=False))
        assert got == [k for k, _ in in_order if b"k00100" < k <= b"k00200"]
        executors = db.stats()["executors"]
        assert set(executors) == {"streaming"}, executors
        assert executors["streaming"]["jobs"] > 0
        levels = db.stats()["levels"]
        assert sum(level["files"] for level in levels[1:]) > 1, levels
    with shaledb.DB(db_path, **REVERSE) as db:
        assert list(db) == in_order


def test_the_comparator_name_guards_the_database(db_path):
    with shaledb.DB(db_path, **small(**REVERSE)) as db:
        db.put(b"a", b"1")
    with pytest.raises(shaledb.Error, match="ReverseComparator"):
        shaledb.DB(db_path)
    with pytest.raises(shaledb.Error, match="ReverseComparator"):
        shaledb.DB(db_path, comparator=reverse, comparator_name=b"OtherName")


def test_bad_comparator_arguments(db_path):
    with pytest.raises(ValueError):
        shaledb.DB(db_path, create_if_missing=True, comparator=reverse)
    with pytest.raises(ValueError):
        shaledb.DB(db_path, create_if_missing=True, comparator_name=b"reverse")
    with pytest.raises(TypeError):
        shaledb.DB(db_path, create_if_missing=True, comparator=1, comparator_name=b"x")
    with pytest.raises(TypeError):
        shaledb.DB(db_path, create_if_missing=True, comparator=reverse, comparator_name="x")

    def broken(a, b):
        raise KeyError("broken comparator")

    # A comparator that cannot compare is found before anything is written.
    with pytest.raises(KeyError, match="broken comparator"):
        shaledb.DB(db_path, create_if_missing=True, comparator=broken, comparator_name=b"x")
    with pytest.raises(TypeError):
        shaledb.DB(db_path, create_if_missing=True,
                   comparator=lambda a, b: None, comparator_name=b"x")
    assert not os.path.exists(db_path)


def test_executors_that_compare_bytes_are_refused(db_path):
    with pytest.raises(shaledb.Error, match="auto or streaming"):
        shaledb.DB(db_path, compaction_executor="parallel", **small(**REVERSE))
    with shaledb.DB(db_path, **small(**REVERSE)) as db:
        fill(db, 1000)
        with pytest.raises(shaledb.Error, match="ReverseComparator"):
            db.compact_range(executor="parallel")
        db.compact_range(executor="streaming")
        assert db.get(b"k00001") is not None


def test_threads_write_and_read_with_a_python_comparator(db_path):
    db = shaledb.DB(db_path, **small(**REVERSE))
    errors = []

    def writer(n):
        try:
            for i in range(1500):
                db.put(b"t%d-%05d" % (n, i), b"%d" % i)
        except BaseException as exc:
            errors.append(exc)

    def reader():
        try:
            for _ in range(20):
                keys = [k for k, _ in db]
                assert keys == sorted(keys, reverse=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=reader))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a thread hung"
    assert not errors, errors
    assert len(list(db)) == 4500
    # Dropped without close(): the background threads are joined without
    # the GIL, though they may be calling the comparator.
    del db


def test_a_comparator_that_raises_later_aborts_the_process(tmp_path):
    program = f"""
import shaledb
calls = 0
def flaky(a, b):
    global calls
    calls += 1
    if calls > 50:
        raise RuntimeError("comparator gave up")
    return (a > b) - (a < b)
db = shaledb.DB({str(tmp_path / 'db')!r}, create_if_missing=True,
                comparator=flaky, comparator_name=b"Flaky")
for i in range(1000):
    db.put(b"key%d" % i, b"value")
"""
    result = subprocess.run([sys.executable, "-c", program], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0
    assert "comparator gave up" in result.stderr
    assert "aborting so that no key is written out of order" in result.stderr


def test_plyvel_databases_with_a_custom_comparator(tmp_path, plyvel):
    # Written by real LevelDB with the comparator, read and extended here.
    # (Debian's plyvel has no context manager: closed by hand.) LevelDB is
    # kept from compacting in the background here: plyvel holds the GIL
    # while LevelDB waits for its background thread, which waits for the
    # GIL to call the comparator, and the two deadlock (plyvel's own
    # limit). So: the default 4 MB write buffer, a few hundred KB written,
    # reads too short to sample seeks.
    leveldb_path = str(tmp_path / "by-leveldb")
    theirs = plyvel.DB(leveldb_path, create_if_missing=True, **REVERSE)
    expected = fill(theirs, 3000)
    theirs.close()
    with shaledb.DB(leveldb_path, **small(**REVERSE)) as ours:
        assert list(ours) == sorted(expected.items(), reverse=True)
        for i in range(3000, 4000):
            ours.put(b"k%05d" % i, b"ours")
            expected[b"k%05d" % i] = b"ours"
        ours.compact_range()
        assert list(ours) == sorted(expected.items(), reverse=True)
    theirs = plyvel.DB(leveldb_path, **REVERSE)
    assert list(theirs) == sorted(expected.items(), reverse=True)
    theirs.close()

    # Written and compacted here, read by LevelDB, which checks the name.
    ours_path = str(tmp_path / "by-shaledb")
    with shaledb.DB(ours_path, **small(**REVERSE)) as ours:
        expected = fill(ours, 3000)
        ours.compact_range()
    theirs = plyvel.DB(ours_path, **REVERSE)
    assert list(theirs) == sorted(expected.items(), reverse=True)
    assert theirs.get(b"k00010") == expected[b"k00010"]
    theirs.close()
    with pytest.raises(plyvel.Error):
        plyvel.DB(ours_path)
