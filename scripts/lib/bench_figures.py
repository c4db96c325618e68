"""The figures of a db_bench-format run, for scripts/compare and
scripts/reproduce (python3, standard library only).

Two sources give the same rows: the JSON document of `shale bench --json`
(docs/benchmarks.md) and the text that every engine prints (db_bench,
`shale bench`, tools/leveldb-bench, tools/rocksdb-bench, Debian's RocksDB
db_bench). A row is a dict: name, us (micros/op), mb (MB/s or None), avg,
p99, p999 (latencies in microseconds, with --histogram=1, else None) and
message (`(N of M found)` and the like, or None). Numbers from the text
stay strings, as printed; numbers from JSON are floats. MB is db_bench's,
2^20 bytes, for every engine.
"""

import json
import re


def text_rows(path):
    """db_bench's text: each report line `name : X micros/op; [Y MB/s] ...`
    (db_bench, shale, leveldb_bench, rocksdb-bench) or `name : X micros/op
    N ops/sec ...; Y MB/s` (Debian's RocksDB db_bench), the first `Count: N
    Average: X` and `Percentiles:` lines after it, and the last `Write
    amplification:`. Returns (rows, write amplification or None)."""
    rows, amp = [], None
    with open(path, errors="replace") as log:
        for line in log:
            f = line.split()
            if re.match(r"Write amplification: [0-9.]+", line):
                amp = f[2]
            elif len(f) >= 4 and f[1] == ":" and f[3] in ("micros/op", "micros/op;"):
                mbps = None
                for i in range(4, len(f) - 1):
                    if f[i + 1] == "MB/s":
                        mbps = f[i]
                message = line.split("micros/op", 1)[1].strip().lstrip(";").strip()
                if mbps is not None:
                    message = message.split("MB/s", 1)[1].strip()
                rows.append({"name": f[0], "us": f[2], "mb": mbps, "avg": None, "p99": None,
                             "p999": None, "message": message or None})
            elif line.startswith("Count:") and rows and rows[-1]["avg"] is None:
                for i in range(len(f) - 1):
                    if f[i] == "Average:":
                        rows[-1]["avg"] = f[i + 1]
            elif line.startswith("Percentiles:") and rows and rows[-1]["p99"] is None:
                for i in range(1, len(f) - 1):
                    if f[i] == "P99:":
                        rows[-1]["p99"] = f[i + 1]
                    if f[i] == "P99.9:":
                        rows[-1]["p999"] = f[i + 1]
    return rows, amp


def json_rows(path):
    """`shale bench --json`'s document (docs/benchmarks.md). Returns (rows,
    write amplification or None)."""
    doc = json_document(path)
    rows = []
    for b in doc["benchmarks"]:
        latency = b.get("latency") or {}
        rows.append({"name": b["name"], "us": b["micros_per_op"], "mb": b.get("mb_per_second"),
                     "avg": latency.get("average"), "p99": latency.get("p99"),
                     "p999": latency.get("p999"), "message": b.get("message")})
    return rows, (doc.get("summary") or {}).get("write_amplification")


def json_document(path):
    """The whole `shale bench --json` document."""
    with open(path) as file:
        return json.load(file)


def found_count(message):
    """How many reads found their key, from readrandom's message `(N of M
    found)` (M is --num for some engines, the reads for others), or None."""
    match = re.search(r"\(([0-9]+) of [0-9]+ found\)", message or "")
    return int(match.group(1)) if match else None
