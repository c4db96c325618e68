# Type stubs for the `shaledb` extension module (src/*.rs). maturin ships
# this file in the wheel as shaledb/__init__.pyi, with a py.typed marker
# (PEP 561). Keep it in step with the #[pyfunction]s, #[pyclass]es and
# #[pymethods] under src/: scripts/test-python checks it with mypy's
# stubtest against the installed wheel, and type-checks tests/typed_usage.py.

import os
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Generic, Literal, TypedDict, TypeVar, final, overload

from typing_extensions import Buffer, Self, Unpack

# Keys, values, bounds and prefixes: `bytes` or any bytes-like object
# (`bytearray`, `memoryview`, `array.array`), copied at the call.
_Key = Buffer
# A database name: a directory as `str`, `bytes` or a path-like.
_Name = str | bytes | os.PathLike[str]
_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)

# What `from shaledb import *` takes: the names #[pymodule] adds (lib.rs).
__all__ = [
    "__version__",
    "__leveldb_version__",
    "Error",
    "IOError",
    "CorruptionError",
    "IteratorInvalidError",
    "DB",
    "PrefixedDB",
    "WriteBatch",
    "Iterator",
    "RawIterator",
    "Snapshot",
    "destroy_db",
    "repair_db",
]

__version__: str
# The LevelDB release whose on-disk format ShaleDB reads and writes.
__leveldb_version__: str

class Error(Exception):
    """Generic database error; the parent of the other shaledb errors."""

class IOError(Error, OSError):  # plyvel's name; shadows the builtin alias
    """I/O error; also a built-in OSError."""

class CorruptionError(Error):
    """Damaged data: a bad checksum, a record that does not decode."""

class IteratorInvalidError(Error):
    """A RawIterator was asked for an entry while not positioned on one."""

# DB.stats(): what the engine counts since the database opened.
class _LevelStats(TypedDict):
    level: int
    files: int
    bytes: int
    compactions: int
    seconds: float
    bytes_read: int
    bytes_written: int

class _ExecutorStats(TypedDict):
    jobs: int
    failures: int
    panics: int
    bytes_read: int
    bytes_written: int
    entries_in: int
    entries_out: int
    seconds: float
    read_seconds: float
    unpack_seconds: float
    merge_seconds: float
    gc_seconds: float
    pack_seconds: float
    write_seconds: float
    megabytes_per_second: float
    device: _DeviceCounters

class _DeviceCounters(TypedDict):
    kernel_launches: int
    transfers: int
    bytes_uploaded: int
    bytes_downloaded: int
    bytes_uploaded_pinned: int
    bytes_downloaded_pinned: int
    host_waits: int
    device_allocations: int
    host_bytes_copied: int
    host_thread_cpu_nanos: int
    pinned_bytes_mapped: int

class _FallbackStats(TypedDict):
    jobs: int
    last_reason: str | None

class _SchedulerStats(TypedDict):
    queue_lengths: list[int]
    running: int
    queued: int
    completed: int
    failed: int
    refused: int
    dropped_stale: int
    trivial_moves: int
    cross_level: int
    split_jobs: int
    subcompactions: int
    executor_bytes_per_second: dict[str, float | None]

class _StallCause(TypedDict):
    count: int
    seconds: float

class _StallCauses(TypedDict):
    l0_slowdown: _StallCause
    l0_stop: _StallCause
    flush_slowdown: _StallCause
    memtable_flush: _StallCause

class _StallStats(TypedDict):
    slowdown_count: int
    slowdown_seconds: float
    stop_count: int
    stop_seconds: float
    causes: _StallCauses

class _WriteStats(TypedDict):
    direct: int
    leads_taken: int
    direct_closed_by_sleep: int

class _Stats(TypedDict):
    levels: list[_LevelStats]
    executors: dict[str, _ExecutorStats]
    fallbacks: _FallbackStats
    scheduler: _SchedulerStats
    stalls: _StallStats
    writes: _WriteStats

# The keyword arguments of DB(...) and repair_db(...): plyvel's, then
# ShaleDB's (README.md, "ShaleDB extras"). Each may be None or left out:
# the engine's default.
class _Options(TypedDict, total=False):
    create_if_missing: bool | None
    error_if_exists: bool | None
    paranoid_checks: bool | None
    write_buffer_size: int | None
    max_open_files: int | None
    lru_cache_size: int | None
    block_size: int | None
    block_restart_interval: int | None
    max_file_size: int | None
    compression: str | bytes | None
    bloom_filter_bits: int | None
    comparator: Callable[[bytes, bytes], int] | None
    comparator_name: bytes | None
    compaction_executor: str | None
    max_background_compactions: int | None
    compaction_threads: int | None
    max_subcompactions: int | None
    cross_level_compaction: bool | None
    concurrent_memtable_writes: bool | None
    pipelined_write: bool | None
    direct_writers: int | None
    direct_writers_back_off: bool | None
    write_thread_max_yield_usec: int | None
    write_thread_slow_yield_usec: int | None
    compaction_pick: str | None
    compaction_nice: int | None
    compaction_memory_budget: int | None
    l0_compaction_trigger: int | None
    l0_slowdown_writes_trigger: int | None
    l0_stop_writes_trigger: int | None
    l0_load_slack: int | None
    max_bytes_for_level_base: int | None
    level_multiplier: float | None
    dynamic_level_targets: bool | None
    seek_compaction: bool | None
    direct_io_for_compaction: bool | None
    opencl_max_device_files: int | None
    opencl_subcompactions: int | None
    opencl_slice_bytes: int | None
    opencl_memory_budget: int | None
    opencl_placement: str | None
    remote_workers: Sequence[str] | None
    remote_token: str | None
    remote_mode: str | None
    remote_keys_window: int | None
    remote_timeout: float | None
    remote_tls_ca: str | os.PathLike[str] | None

@final
class DB:
    """A LevelDB database, opened with ShaleDB."""

    def __new__(cls, name: _Name, **options: Unpack[_Options]) -> Self: ...
    @property
    def name(self) -> _Name:
        """The name the database was opened with."""
    @property
    def closed(self) -> bool:
        """True once `close()` ran."""
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: type[BaseException] | None = None,
        _exc_value: BaseException | None = None,
        _traceback: TracebackType | None = None,
    ) -> Literal[False]: ...
    @overload
    def get(
        self,
        key: _Key,
        default: None = None,
        *,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> bytes | None: ...
    @overload
    def get(
        self,
        key: _Key,
        default: _T,
        *,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> bytes | _T: ...
    def put(self, key: _Key, value: _Key, *, sync: bool = False) -> None: ...
    def delete(self, key: _Key, *, sync: bool = False) -> None: ...
    def __contains__(self, key: _Key, /) -> bool: ...
    def write_batch(self, *, transaction: bool = False, sync: bool = False) -> WriteBatch: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[True] = True,
        include_value: Literal[True] = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[tuple[bytes, bytes]]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[True] = True,
        include_value: Literal[False],
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[bytes]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[False],
        include_value: Literal[True] = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[bytes]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: bool = True,
        include_value: bool = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[tuple[bytes, bytes] | bytes]: ...
    def __iter__(self) -> Iterator[tuple[bytes, bytes]]: ...
    def raw_iterator(
        self, *, verify_checksums: bool | None = None, fill_cache: bool = True
    ) -> RawIterator: ...
    def snapshot(self) -> Snapshot: ...
    def get_property(self, name: str | _Key) -> bytes | None: ...
    def compact_range(
        self,
        *,
        start: _Key | None = None,
        stop: _Key | None = None,
        executor: str | None = None,
    ) -> None: ...
    def approximate_size(self, start: _Key, stop: _Key) -> int: ...
    def approximate_sizes(self, *ranges: tuple[_Key, _Key]) -> list[int]: ...
    def prefixed_db(self, prefix: _Key) -> PrefixedDB: ...
    def stats(self) -> _Stats:
        """ShaleDB extra: compaction and stall statistics since open."""

@final
class PrefixedDB:
    """A `DB`-like view whose keys are prefixed with `prefix`."""

    @property
    def db(self) -> DB: ...
    @property
    def prefix(self) -> bytes: ...
    @overload
    def get(
        self,
        key: _Key,
        default: None = None,
        *,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> bytes | None: ...
    @overload
    def get(
        self,
        key: _Key,
        default: _T,
        *,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> bytes | _T: ...
    def put(self, key: _Key, value: _Key, *, sync: bool = False) -> None: ...
    def delete(self, key: _Key, *, sync: bool = False) -> None: ...
    def __contains__(self, key: _Key, /) -> bool: ...
    def write_batch(self, *, transaction: bool = False, sync: bool = False) -> WriteBatch: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[True] = True,
        include_value: Literal[True] = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[tuple[bytes, bytes]]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[True] = True,
        include_value: Literal[False],
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[bytes]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[False],
        include_value: Literal[True] = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[bytes]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: bool = True,
        include_value: bool = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[tuple[bytes, bytes] | bytes]: ...
    def __iter__(self) -> Iterator[tuple[bytes, bytes]]: ...
    def snapshot(self) -> Snapshot: ...
    def prefixed_db(self, prefix: _Key) -> PrefixedDB: ...

@final
class WriteBatch:
    """A batch of writes, applied atomically by `write()` or at the end
    of its `with` block. Made by `DB.write_batch()`."""

    def put(self, key: _Key, value: _Key) -> None: ...
    def delete(self, key: _Key) -> None: ...
    def clear(self) -> None: ...
    def write(self) -> None: ...
    def append(self, source: WriteBatch) -> None: ...
    def approximate_size(self) -> int: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        _exc_value: BaseException | None = None,
        _traceback: TracebackType | None = None,
    ) -> Literal[False]: ...

@final
class Iterator(Generic[_T_co]):
    """plyvel's iterator over a key range: `(key, value)` tuples, or keys
    or values alone (`include_value=False` / `include_key=False`)."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> _T_co: ...
    def prev(self) -> _T_co: ...
    def seek_to_start(self) -> None: ...
    def seek_to_stop(self) -> None: ...
    def seek(self, target: _Key) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: type[BaseException] | None = None,
        _exc_value: BaseException | None = None,
        _traceback: TracebackType | None = None,
    ) -> Literal[False]: ...

@final
class RawIterator:
    """LevelDB's cursor interface. Made by `DB.raw_iterator()`."""

    def valid(self) -> bool: ...
    def seek_to_first(self) -> None: ...
    def seek_to_last(self) -> None: ...
    def seek(self, target: _Key) -> None: ...
    def next(self) -> None: ...
    def prev(self) -> None: ...
    def key(self) -> bytes: ...
    def value(self) -> bytes: ...
    def item(self) -> tuple[bytes, bytes]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: type[BaseException] | None = None,
        _exc_value: BaseException | None = None,
        _traceback: TracebackType | None = None,
    ) -> Literal[False]: ...

@final
class Snapshot:
    """A consistent point-in-time view of a database or prefixed view."""

    @overload
    def get(
        self,
        key: _Key,
        default: None = None,
        *,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> bytes | None: ...
    @overload
    def get(
        self,
        key: _Key,
        default: _T,
        *,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> bytes | _T: ...
    def __contains__(self, key: _Key, /) -> bool: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[True] = True,
        include_value: Literal[True] = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[tuple[bytes, bytes]]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[True] = True,
        include_value: Literal[False],
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[bytes]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: Literal[False],
        include_value: Literal[True] = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[bytes]: ...
    @overload
    def iterator(
        self,
        *,
        reverse: bool = False,
        start: _Key | None = None,
        stop: _Key | None = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: _Key | None = None,
        include_key: bool = True,
        include_value: bool = True,
        verify_checksums: bool | None = None,
        fill_cache: bool = True,
    ) -> Iterator[tuple[bytes, bytes] | bytes]: ...
    def __iter__(self) -> Iterator[tuple[bytes, bytes]]: ...
    def raw_iterator(
        self, *, verify_checksums: bool | None = None, fill_cache: bool = True
    ) -> RawIterator: ...
    def close(self) -> None: ...
    def release(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: type[BaseException] | None = None,
        _exc_value: BaseException | None = None,
        _traceback: TracebackType | None = None,
    ) -> Literal[False]: ...

def destroy_db(name: _Name) -> None:
    """Deletes the database `name` and its directory (when empty)."""

def repair_db(name: _Name, **options: Unpack[_Options]) -> None:
    """Repairs the database `name` from the files in its directory, as
    LevelDB's `RepairDB`; `DB(...)`'s keyword arguments shape the tables
    it writes."""
