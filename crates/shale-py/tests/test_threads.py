"""Several Python threads on one database: writers, readers, iterators
and snapshots at once; close() from one thread while others work."""

import threading
import time

import pytest

import shaledb


def run_threads(targets):
    errors = []

    def wrap(target):
        def run():
            try:
                target()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_concurrent_writers_and_readers(tmp_path):
    db = shaledb.DB(str(tmp_path / "db"), create_if_missing=True, write_buffer_size=64 * 1024)
    writers, per_writer = 4, 1500

    def writer(n):
        def run():
            for i in range(per_writer):
                db.put(b"w%d-%05d" % (n, i), b"%d" % i)
                if i % 100 == 0:
                    with db.write_batch() as batch:
                        batch.put(b"batch-%d-%d" % (n, i), b"x")
                        batch.delete(b"w%d-%05d" % (n, i))
        return run

    def reader():
        for _ in range(3):
            seen = 0
            for key, value in db.iterator(prefix=b"w"):
                seen += 1
            assert seen >= 0
            db.get(b"w0-00001")

    run_threads([writer(n) for n in range(writers)] + [reader, reader])
    for n in range(writers):
        for i in range(per_writer):
            expected = None if i % 100 == 0 else b"%d" % i
            assert db.get(b"w%d-%05d" % (n, i)) == expected
    db.close()


def test_iterators_and_snapshots_stay_valid_while_others_write(tmp_path):
    db = shaledb.DB(str(tmp_path / "db"), create_if_missing=True, write_buffer_size=32 * 1024)
    for i in range(2000):
        db.put(b"%05d" % i, b"first")
    snapshot = db.snapshot()
    iterator = db.iterator()
    raw = snapshot.raw_iterator()
    raw.seek_to_first()
    stop = threading.Event()

    def overwrite():
        round_ = 0
        while not stop.is_set() and round_ < 5:
            for i in range(2000):
                db.put(b"%05d" % i, b"round-%d" % round_)
                if i % 3 == 0:
                    db.delete(b"%05d" % i)
            round_ += 1
        db.compact_range()

    def read_snapshot():
        try:
            for _ in range(5):
                assert {value for _, value in snapshot.iterator()} == {b"first"}
                assert snapshot.get(b"01234") == b"first"
        finally:
            stop.set()

    def read_iterator():
        entries = list(iterator)
        assert len(entries) == 2000
        assert {value for _, value in entries} == {b"first"}
        count = 0
        while raw.valid():
            assert raw.value() == b"first"
            raw.next()
            count += 1
        assert count == 2000

    run_threads([overwrite, read_snapshot, read_iterator])
    snapshot.close()
    db.close()


def test_gil_is_released_during_engine_calls(tmp_path):
    """A pure-Python thread keeps running while another thread is inside
    a long engine call (here a synced write loop and a full compaction)."""
    db = shaledb.DB(str(tmp_path / "db"), create_if_missing=True, write_buffer_size=64 * 1024)
    for i in range(20000):
        db.put(b"%06d" % (i * 7919 % 20000), b"v" * 50)
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    started = time.monotonic()
    db.compact_range()
    elapsed = time.monotonic() - started
    done.set()
    thread.join()
    # Held GIL: no ticks during the call. Released: about one per ms.
    during = [t for t in ticks if started <= t <= started + elapsed]
    if elapsed > 0.05:
        assert len(during) > 5, (elapsed, len(during))
    db.close()


def test_close_while_other_threads_work(tmp_path):
    """Closing from one thread while others read, write and iterate never
    crashes: the others get RuntimeError (or finish their call)."""
    for attempt in range(3):
        db = shaledb.DB(str(tmp_path / ("db%d" % attempt)), create_if_missing=True)
        for i in range(1000):
            db.put(b"%04d" % i, b"v")
        started = threading.Barrier(4)

        def worker(kind):
            def run():
                started.wait()
                try:
                    for i in range(100000):
                        if kind == "write":
                            db.put(b"%04d" % (i % 1000), b"w")
                        elif kind == "read":
                            db.get(b"%04d" % (i % 1000))
                        else:
                            for _ in db.iterator():
                                pass
                except RuntimeError:
                    return
                pytest.fail("the database was never seen closed")
            return run

        def closer():
            started.wait()
            time.sleep(0.05)
            db.close()

        run_threads([worker("write"), worker("read"), worker("iterate"), closer])
        assert db.closed


def test_close_returns_once_the_database_is_closed(tmp_path):
    """close() waits for the calls other threads have under way, so the
    path can be opened again as soon as it returns (the LOCK is free)."""
    path = str(tmp_path / "db")
    for attempt in range(20):
        db = shaledb.DB(path, create_if_missing=True)
        started = threading.Barrier(3)
        stop = threading.Event()

        def writer():
            started.wait()
            try:
                i = 0
                while not stop.is_set():
                    db.put(b"%06d" % (i % 5000), b"x" * 100)
                    i += 1
            except RuntimeError:
                pass

        def closer():
            started.wait()
            time.sleep(0.02)
            db.close()
            try:
                again = shaledb.DB(path)
            finally:
                stop.set()
            again.close()

        run_threads([writer, writer, closer])
