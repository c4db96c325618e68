"""Databases written by real LevelDB (Debian's python3-plyvel) read by
shaledb value for value, and the other way round."""

import random

import shaledb


def sample(seed, count=5000):
    """Keys of varied lengths with values of varied sizes (some compress
    well, some not), and a few deletions."""
    rng = random.Random(seed)
    data = {}
    for i in range(count):
        key = b"key-%08d-" % rng.randrange(10 ** 8) + bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
        if rng.random() < 0.5:
            value = b"%d" % i * rng.randrange(1, 50)
        else:
            value = bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
        data[key] = value
    deleted = set(rng.sample(sorted(data), 300))
    return data, deleted


def test_leveldb_database_read_by_shaledb(plyvel, tmp_path):
    path = str(tmp_path / "db")
    data, deleted = sample(1)
    db = plyvel.DB(path, create_if_missing=True, write_buffer_size=64 * 1024, bloom_filter_bits=10)
    for key, value in data.items():
        db.put(key, value)
    for key in deleted:
        db.delete(key)
    db.compact_range(start=b"key-2", stop=b"key-5")
    db.put(b"in-the-log", b"only in LevelDB's WAL")
    db.close()

    expected = {k: v for k, v in data.items() if k not in deleted}
    expected[b"in-the-log"] = b"only in LevelDB's WAL"
    with shaledb.DB(path) as ours:
        assert dict(ours) == expected
        assert list(ours.iterator(include_value=False)) == sorted(expected)
        for key in deleted:
            assert ours.get(key) is None
        for key, value in expected.items():
            assert ours.get(key) == value
        # And it keeps working as a ShaleDB database.
        ours.put(b"added-by-shaledb", b"yes")
        ours.compact_range()
        assert ours.get(b"in-the-log") == b"only in LevelDB's WAL"


def test_shaledb_database_read_by_leveldb(plyvel, tmp_path):
    path = str(tmp_path / "db")
    data, deleted = sample(2)
    with shaledb.DB(path, create_if_missing=True, write_buffer_size=64 * 1024) as ours:
        for key, value in data.items():
            ours.put(key, value)
        with ours.write_batch() as batch:
            for key in deleted:
                batch.delete(key)
        ours.compact_range(start=b"key-2", stop=b"key-5")
        ours.put(b"in-the-log", b"only in ShaleDB's WAL")

    expected = {k: v for k, v in data.items() if k not in deleted}
    expected[b"in-the-log"] = b"only in ShaleDB's WAL"
    db = plyvel.DB(path, paranoid_checks=True)
    try:
        assert dict(db.iterator(verify_checksums=True)) == expected
        for key, value in expected.items():
            assert db.get(key, verify_checksums=True) == value
        for key in deleted:
            assert db.get(key) is None
        db.put(b"added-by-leveldb", b"yes")
        db.compact_range()
    finally:
        db.close()
    with shaledb.DB(path) as ours:
        assert ours.get(b"added-by-leveldb") == b"yes"
        assert len(list(ours)) == len(expected) + 1


def test_same_program_under_both_modules(plyvel, tmp_path):
    """`import shaledb as plyvel`: one program, both modules, same output."""

    def program(module, path):
        out = []
        # plyvel 1.5's DB is no context manager (shaledb's is).
        db = module.DB(path, create_if_missing=True)
        try:
            with db.write_batch(transaction=True) as batch:
                for i in range(50):
                    batch.put(b"user-%02d" % i, b"name-%d" % i)
            users = db.prefixed_db(b"user-")
            with users.snapshot() as snapshot:
                users.delete(b"07")
                out.append(snapshot.get(b"07"))
                out.append(list(snapshot.iterator(start=b"05", stop=b"09", include_stop=True)))
            out.append(list(users.iterator(reverse=True, prefix=b"0", include_value=False)))
            it = db.iterator(start=b"user-10", include_start=False)
            out.append([next(it), next(it), it.prev(), it.prev()])
            it.seek(b"user-40")
            out.append(next(it))
            raw = db.raw_iterator()
            raw.seek(b"user-2")
            raw.prev()
            out.append(raw.item())
            out.append(db.get(b"missing", b"default"))
        finally:
            db.close()
        return out

    assert program(shaledb, str(tmp_path / "ours")) == program(plyvel, str(tmp_path / "theirs"))
