"""A typed program using the whole public API, for the type stubs
(shaledb.pyi, shipped in the wheel): scripts/test-python runs mypy on it
(--strict, --warn-unreachable, --warn-unused-ignores) against the installed package, and
test_typing.py runs it, so what the stubs promise is what the module does.

The lines under `if TYPE_CHECKING:` never run: each is a misuse the stubs
must reject, and its `type: ignore[code]` would be reported unused (an
error) if mypy accepted it.
"""

from __future__ import annotations

import array
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple, Union

import shaledb


def descending(a: bytes, b: bytes) -> int:
    return (a < b) - (a > b)


def main(directory: str) -> None:
    version: str = shaledb.__version__
    leveldb: str = shaledb.__leveldb_version__
    assert version and leveldb == "1.23"

    path = os.path.join(directory, "typed")
    with shaledb.DB(path, create_if_missing=True, bloom_filter_bits=10,
                    compaction_executor="streaming", level_multiplier=10) as db:
        name: Union[str, bytes, "os.PathLike[str]"] = db.name
        assert name == path
        db.put(b"a", b"1", sync=False)
        db.put(bytearray(b"b"), memoryview(b"2"))
        db.put(array.array("B", b"c"), b"3")
        value: Optional[bytes] = db.get(b"a")
        assert value == b"1"
        fallback: Union[bytes, int] = db.get(b"missing", 0, fill_cache=False)
        assert fallback == 0
        assert b"b" in db
        db.delete(b"c")

        pairs: List[Tuple[bytes, bytes]] = list(db)
        assert pairs == [(b"a", b"1"), (b"b", b"2")]
        with db.iterator(include_value=False) as keys_only:
            keys: List[bytes] = list(keys_only)
        assert keys == [b"a", b"b"]
        values: List[bytes] = list(db.iterator(include_key=False, reverse=True))
        assert values == [b"2", b"1"]
        flags = {"include_value": True}
        either: List[Union[Tuple[bytes, bytes], bytes]] = list(
            db.iterator(include_value=flags["include_value"])
        )
        assert either == pairs
        it = db.iterator(start=b"a", stop=b"b", include_stop=True)
        first: Tuple[bytes, bytes] = next(it)
        assert first == (b"a", b"1")
        assert it.prev() == (b"a", b"1")
        it.seek(b"b")
        it.seek_to_start()
        it.seek_to_stop()
        it.close()

        with db.raw_iterator(verify_checksums=True) as raw:
            raw.seek_to_first()
            while raw.valid():
                key: bytes = raw.key()
                item: Tuple[bytes, bytes] = raw.item()
                assert item == (key, raw.value())
                raw.next()
            raw.seek_to_last()
            raw.prev()
            raw.seek(b"a")

        with db.write_batch(transaction=True) as batch:
            batch.put(b"d", b"4")
            batch.delete(b"a")
        other = db.write_batch()
        other.put(b"e", b"5")
        other.append(batch)
        size: int = other.approximate_size()
        assert size > 0
        other.write()
        other.clear()

        with db.snapshot() as snapshot:
            db.put(b"f", b"6")
            assert snapshot.get(b"f") is None and b"e" in snapshot
            old: List[Tuple[bytes, bytes]] = list(snapshot.iterator(prefix=b"e"))
            assert old == [(b"e", b"5")]
            snapshot.raw_iterator().close()
        snapshot.release()

        users = db.prefixed_db(b"user-")
        users.put(b"1", b"ann")
        nested: shaledb.PrefixedDB = users.prefixed_db(b"x")
        assert nested.prefix == b"user-x" and nested.db is db
        assert users.get(b"1") == b"ann" and b"1" in users
        assert list(users) == [(b"1", b"ann")]
        with users.write_batch() as prefixed_batch:
            prefixed_batch.put(b"2", b"bob")
        assert list(users.snapshot().iterator(include_value=False)) == [b"1", b"2"]
        users.delete(b"2")

        db.compact_range(start=b"a", stop=None, executor=None)
        sizes: List[int] = db.approximate_sizes((b"a", b"z"), (b"x", b"y"))
        assert len(sizes) == 2 and db.approximate_size(b"a", b"z") >= 0
        prop: Optional[bytes] = db.get_property(b"leveldb.stats")
        assert prop is not None and db.get_property("no.such") is None

        stats = db.stats()
        level0: Dict[str, object] = dict(stats["levels"][0])
        assert level0["level"] == 0
        files: int = stats["levels"][0]["files"]
        stalls: float = stats["stalls"]["stop_seconds"]
        reason: Optional[str] = stats["fallbacks"]["last_reason"]
        rates: Dict[str, Optional[float]] = stats["scheduler"]["executor_bytes_per_second"]
        for executor, counters in stats["executors"].items():
            jobs: int = counters["jobs"]
            assert executor and jobs >= 0
        assert files >= 0 and stalls >= 0 and (reason is None or reason) and rates is not None
    assert db.closed

    ordered = os.path.join(directory, "ordered")
    with shaledb.DB(ordered, create_if_missing=True, comparator=descending,
                    comparator_name=b"descending") as reversed_db:
        reversed_db.put(b"a", b"")
        reversed_db.put(b"b", b"")
        assert list(reversed_db.iterator(include_value=False)) == [b"b", b"a"]

    try:
        shaledb.DB(path, error_if_exists=True)
        raise AssertionError("error_if_exists=True opened an existing database")
    except shaledb.Error as error:
        assert not isinstance(error, shaledb.CorruptionError)
    held = shaledb.DB(path)
    try:
        shaledb.DB(path)
        raise AssertionError("opened a database twice")
    except shaledb.IOError as error:
        assert isinstance(error, OSError) and isinstance(error, shaledb.Error)
    unpositioned = held.raw_iterator()
    try:
        unpositioned.key()
        raise AssertionError("an unpositioned RawIterator had a key")
    except shaledb.IteratorInvalidError:
        pass
    held.close()

    shaledb.repair_db(path, paranoid_checks=True)
    shaledb.destroy_db(path)
    shaledb.destroy_db(ordered.encode())

    if TYPE_CHECKING:
        db.put("text key", b"v")  # type: ignore[arg-type]
        db.get(1)  # type: ignore[call-overload]
        shaledb.DB(path, create_if_misssing=True)  # type: ignore[call-arg]
        shaledb.DB(path, max_open_files="many")  # type: ignore[arg-type]
        db.iterator(start="a")  # type: ignore[call-overload]
        not_pairs: List[bytes] = list(db)  # type: ignore[arg-type]
        db.stats()["levels"][0]["no_such_key"]  # type: ignore[typeddict-item]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        main(scratch)
