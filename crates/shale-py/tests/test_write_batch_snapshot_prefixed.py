"""WriteBatch, Snapshot and PrefixedDB."""

import pytest

import shaledb


def test_write_batch(db):
    db.put(b"gone", b"x")
    batch = db.write_batch()
    batch.put(b"a", b"1")
    batch.put(bytearray(b"b"), memoryview(b"2"))
    batch.delete(b"gone")
    assert db.get(b"a") is None  # nothing written before write()
    batch.write()
    assert db.get(b"a") == b"1" and db.get(b"b") == b"2" and db.get(b"gone") is None
    batch.clear()
    batch.put(b"c", b"3")
    batch.write()
    assert db.get(b"c") == b"3"
    with pytest.raises(TypeError):
        batch.put("a", b"1")
    with pytest.raises(TypeError):
        batch.delete(1)


def test_write_batch_context_manager(db):
    with db.write_batch(sync=True) as batch:
        batch.put(b"a", b"1")
        batch.put(b"b", b"2")
    assert db.get(b"a") == b"1"
    # Not a transaction: written even when the block raises.
    with pytest.raises(ValueError):
        with db.write_batch() as batch:
            batch.put(b"c", b"3")
            raise ValueError
    assert db.get(b"c") == b"3"


def test_write_batch_transaction(db):
    with pytest.raises(ValueError):
        with db.write_batch(transaction=True) as batch:
            batch.put(b"t", b"1")
            raise ValueError
    assert db.get(b"t") is None
    with db.write_batch(transaction=True) as batch:
        batch.put(b"t", b"2")
    assert db.get(b"t") == b"2"


def test_write_batch_append_and_size(db):
    first = db.write_batch()
    second = db.write_batch()
    empty_size = first.approximate_size()
    first.put(b"a", b"1")
    second.put(b"b", b"2")
    second.delete(b"c")
    grown = first.approximate_size()
    assert grown > empty_size
    first.append(second)
    assert first.approximate_size() == grown + second.approximate_size() - empty_size
    first.append(first)  # itself: doubles
    first.write()
    assert db.get(b"a") == b"1" and db.get(b"b") == b"2"
    with pytest.raises(TypeError):
        first.append(b"not a batch")


def test_snapshot(db):
    db.put(b"a", b"old")
    db.put(b"b", b"old")
    snapshot = db.snapshot()
    db.put(b"a", b"new")
    db.delete(b"b")
    db.put(b"c", b"new")
    assert snapshot.get(b"a") == b"old"
    assert snapshot.get(b"b") == b"old"
    assert snapshot.get(b"c") is None
    assert snapshot.get(b"c", b"default") == b"default"
    assert b"b" in snapshot
    assert list(snapshot) == [(b"a", b"old"), (b"b", b"old")]
    assert list(snapshot.iterator(reverse=True, include_value=False)) == [b"b", b"a"]
    raw = snapshot.raw_iterator()
    raw.seek_to_last()
    assert raw.item() == (b"b", b"old")
    assert list(db) == [(b"a", b"new"), (b"c", b"new")]
    snapshot.close()
    with pytest.raises(RuntimeError):
        snapshot.get(b"a")
    with pytest.raises(RuntimeError):
        snapshot.iterator()
    snapshot.release()  # twice is fine
    # An iterator made from the snapshot outlives its release.
    assert raw.key() == b"b"


def test_snapshot_survives_compaction(db):
    for i in range(1000):
        db.put(b"%04d" % i, b"old")
    with db.snapshot() as snapshot:
        it = snapshot.iterator()
        for i in range(1000):
            db.put(b"%04d" % i, b"new")
        db.compact_range()
        assert snapshot.get(b"0500") == b"old"
        assert {v for _, v in it} == {b"old"}
        assert {v for _, v in snapshot.iterator()} == {b"old"}
    with pytest.raises(RuntimeError):
        snapshot.get(b"0500")


def test_prefixed_db(db):
    db.put(b"a", b"outside")
    db.put(b"z", b"outside")
    users = db.prefixed_db(b"user-")
    assert users.prefix == b"user-"
    assert users.db is db
    users.put(b"1", b"one")
    users.put(b"2", b"two")
    assert db.get(b"user-1") == b"one"
    assert users.get(b"1") == b"one"
    assert users.get(b"3", b"none") == b"none"
    assert b"2" in users
    assert list(users) == [(b"1", b"one"), (b"2", b"two")]
    assert list(users.iterator(reverse=True, include_value=False)) == [b"2", b"1"]
    assert list(users.iterator(start=b"2")) == [(b"2", b"two")]
    assert list(users.iterator(stop=b"2", include_value=False)) == [b"1"]
    with users.write_batch() as batch:
        batch.put(b"3", b"three")
        batch.delete(b"1")
    assert db.get(b"user-3") == b"three" and db.get(b"user-1") is None
    with users.snapshot() as snapshot:
        users.delete(b"3")
        assert snapshot.get(b"3") == b"three"
        assert list(snapshot.iterator(include_value=False)) == [b"2", b"3"]
    admins = users.prefixed_db(b"admin-")
    admins.put(b"x", b"X")
    assert db.get(b"user-admin-x") == b"X"
    assert list(users.iterator(prefix=b"admin-")) == [(b"admin-x", b"X")]
    users.delete(b"2")
    assert users.get(b"2") is None
    assert "user-" in repr(users)
    with pytest.raises(TypeError):
        db.prefixed_db("text")


def test_prefixed_db_all_ff_prefix(db):
    db.put(b"\xff\xff", b"a")
    db.put(b"\xff\xff\x00", b"b")
    db.put(b"\xfe", b"c")
    view = db.prefixed_db(b"\xff\xff")
    assert list(view) == [(b"", b"a"), (b"\x00", b"b")]
