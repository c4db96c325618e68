"""scripts/reproduce's figures: one row per run phase for results.tsv, read
from each engine's own output, and summary.md, rewritten from results.tsv
after every run (python3, standard library only).

  reproduce.py fill-row ENGINE VALUE REPEAT NUM LOG TIME DB_BYTES DB_LOG [JSON] [TIMELINE]
  reproduce.py read-row ENGINE VALUE REPEAT NUM LOG TIME [JSON]
  reproduce.py status-row ENGINE VALUE REPEAT NUM PHASE STATUS NOTE
  reproduce.py header
  reproduce.py summary OUT
  reproduce.py series OUT        (the --series arguments of fill_timeline)

LOG is the engine's stdout and stderr, TIME the `/usr/bin/time -f '%e %U %S'`
file of its process, DB_LOG a copy of the database's own LOG file (LevelDB's
and RocksDB's compaction times are read from it), JSON the `shale bench
--json` document of ShaleDB's runs. How each engine's compaction figure is
computed is in COMPACTION_METHODS, which summary.md quotes.
"""

import datetime
import gzip
import json
import os
import re
import statistics
import sys

from bench_figures import found_count, json_document, json_rows, text_rows

MB = 1048576.0

COLUMNS = ["engine", "value_size", "repeat", "num", "phase", "status", "note",
           "us_per_op", "mb_s", "ops_s", "avg_us", "p99_us", "p999_us",
           "comp_input_bytes", "comp_seconds", "comp_mb_s",
           "cpu_s", "cpu_us_per_op", "write_amp", "stall_s", "stall_note", "db_bytes", "wall_s",
           "found", "reads", "timeline"]

COMPACTION_METHODS = {
    "shale": "ShaleDB: its `Compaction speed` line (`summary.compaction` of `--json`): input bytes "
             "of every compaction over the seconds the executors spent on them; flushes are not "
             "compactions and are left out.",
    "leveldb": "LevelDB: from the database's LOG, which timestamps every line to the microsecond: "
               "the seconds from each `Compacting ...` line to its `Compacted ...` line, less the "
               "memtable flushes LevelDB runs inside a compaction (`Level-0 table #N: started` to "
               "its `bytes` line; leveldb.stats leaves them out of Time(sec) the same way); input "
               "bytes: the sizes (from the `Level-0 table` and `Generated table` lines) of the "
               "tables deleted (`Delete type=2`), which only compactions do. leveldb.stats itself "
               "prints whole MB and whole seconds per level, too coarse below a few GB; its "
               "Read(MB) and Time(sec) sums are printed in the fill's log (`stats`) as a check.",
    "rocksdb": "RocksDB: from the database's LOG events: `input_data_size` of each "
               "`compaction_started` over the `compaction_time_micros` of its "
               "`compaction_finished` (flushes and trivial moves are other events); rocksdb.stats' "
               "Read(GB) and Comp(sec) columns say the same in coarser units.",
}


def family(engine):
    return "shale" if engine.startswith("shale") else engine


def number(value):
    """A float from a parsed cell (string, number or None)."""
    if value is None or value == "-" or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def cell(value, fmt="%.6g"):
    if value is None:
        return "-"
    if isinstance(value, float):
        return fmt % value
    return str(value).replace("\t", " ").replace("\n", " ")


def emit(row):
    print("\t".join(cell(row.get(c)) for c in COLUMNS))


def read_time(path):
    """(wall, user + system) seconds from `/usr/bin/time -f '%e %U %S'`, the
    file's last line (the time's own messages, such as a signal, come
    first)."""
    try:
        with open(path) as file:
            lines = [line.split() for line in file if line.strip()]
    except OSError:
        return None, None
    for fields in reversed(lines):
        try:
            wall, user, system = (float(x) for x in fields[:3])
            return wall, user + system
        except ValueError:
            continue
    return None, None


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", errors="replace")
    return open(path, errors="replace")


LEVELDB_TIME = re.compile(r"^(\d{4}/\d\d/\d\d-\d\d:\d\d:\d\d\.\d{6}) \S+ (.*)$")


def leveldb_compaction(db_log):
    """(input bytes, seconds, waits) of the compactions in a LevelDB LOG
    (COMPACTION_METHODS["leveldb"]); waits: the `waiting...` lines of
    writers stopped for a full memtable or too many L0 files."""
    sizes, flushes = {}, {}
    started, nested = None, 0.0
    seconds, deleted, waits, compactions = 0.0, 0, 0, 0
    with open_text(db_log) as log:
        for line in log:
            m = LEVELDB_TIME.match(line.rstrip("\n"))
            if not m:
                continue
            t = datetime.datetime.strptime(m.group(1), "%Y/%m/%d-%H:%M:%S.%f").timestamp()
            text = m.group(2)
            if text.endswith("waiting..."):
                waits += 1
            elif (f := re.match(r"Level-0 table #(\d+): started", text)):
                flushes[f.group(1)] = t
            elif (f := re.match(r"Level-0 table #(\d+): (\d+) bytes", text)):
                sizes[f.group(1)] = int(f.group(2))
                begun = flushes.pop(f.group(1), None)
                if started is not None and begun is not None:
                    nested += t - begun
            elif (f := re.match(r"Generated table #(\d+)@\d+: \d+ keys, (\d+) bytes", text)):
                sizes[f.group(1)] = int(f.group(2))
            elif text.startswith("Compacting "):
                started, nested = t, 0.0
            elif text.startswith("Compacted ") and started is not None:
                seconds += t - started - nested
                compactions += 1
                started = None
            elif (f := re.match(r"Delete type=2 #(\d+)", text)):
                deleted += sizes.get(f.group(1), 0)
    if compactions == 0:
        return None, None, waits
    return deleted, seconds, waits


def rocksdb_compaction(db_log):
    """(input bytes, seconds) of the compactions in a RocksDB LOG
    (COMPACTION_METHODS["rocksdb"])."""
    inputs, micros = {}, {}
    with open_text(db_log) as log:
        for line in log:
            if "EVENT_LOG_v1 " not in line:
                continue
            try:
                event = json.loads(line.split("EVENT_LOG_v1 ", 1)[1])
            except ValueError:
                continue
            if event.get("event") == "compaction_started":
                inputs[event.get("job")] = event.get("input_data_size", 0)
            elif event.get("event") == "compaction_finished":
                micros[event.get("job")] = event.get("compaction_time_micros", 0)
    done = [job for job in micros if job in inputs]
    if not done:
        return None, None
    return sum(inputs[j] for j in done), sum(micros[j] for j in done) / 1e6


def rocksdb_stall(log):
    """Seconds of `Cumulative stall: H:M:S` in rocksdb.stats (the fill's
    `stats` benchmark), or None."""
    with open(log, errors="replace") as text:
        for line in text:
            m = re.match(r"Cumulative stall: (\d+):(\d+):([0-9.]+) H:M:S", line)
            if m:
                return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    return None


def leveldb_stats_check(log):
    """(Read MB, Time s) summed over the levels of the leveldb.stats that the
    fill's `stats` benchmark printed, or None."""
    read, time, seen = 0.0, 0.0, False
    with open(log, errors="replace") as text:
        for line in text:
            f = line.split()
            if len(f) == 6 and all(re.match(r"^[0-9.]+$", x) for x in f):
                seen = True
                time += float(f[3])
                read += float(f[4])
    return (read, time) if seen else None


def benchmark_row(rows, name):
    for r in rows:
        if r["name"] == name:
            return r
    return None


def fill_row(engine, value, repeat, num, log, time_file, db_bytes, db_log, json_path=None,
             timeline=None):
    row = {"engine": engine, "value_size": value, "repeat": repeat, "num": num, "phase": "fill",
           "status": "ok"}
    doc = None
    if json_path and os.path.exists(json_path):
        rows, amp = json_rows(json_path)
        doc = json_document(json_path)
    else:
        rows, amp = text_rows(log)
    b = benchmark_row(rows, "fillrandom")
    if b is None:
        row.update(status="failed", note="no fillrandom line in " + os.path.basename(log))
        emit(row)
        return
    row.update(us_per_op=number(b["us"]), mb_s=number(b["mb"]), avg_us=number(b["avg"]),
               p99_us=number(b["p99"]), p999_us=number(b["p999"]), write_amp=number(amp))
    notes = []
    if doc is not None:
        bench = next(x for x in doc["benchmarks"] if x["name"] == "fillrandom")
        if bench.get("seconds"):
            row["ops_s"] = bench["ops"] / bench["seconds"]
        summary = doc.get("summary") or {}
        compaction = summary.get("compaction") or {}
        if compaction.get("seconds"):
            row.update(comp_input_bytes=compaction.get("input_bytes"),
                       comp_seconds=compaction.get("seconds"))
        stalls = summary.get("stalls") or {}
        row["stall_s"] = (stalls.get("slowdown_seconds") or 0.0) + (stalls.get("stop_seconds") or 0.0)
        row["stall_note"] = "slowed %s times, stopped %s times" % (
            stalls.get("slowdown_count", "?"), stalls.get("stop_count", "?"))
    else:
        us = number(b["us"])
        if us:
            # One writer: micros/op is the wall time per put.
            row["ops_s"] = 1e6 / us
        if engine == "leveldb" and db_log and os.path.exists(db_log):
            inputs, seconds, waits = leveldb_compaction(db_log)
            row.update(comp_input_bytes=inputs, comp_seconds=seconds)
            row["stall_note"] = "%d waits logged" % waits
            check = leveldb_stats_check(log)
            if check and check[0] > 0:
                notes.append("leveldb.stats: Read %.0f MB, Time %.0f s" % check)
        elif engine == "rocksdb" and db_log and os.path.exists(db_log):
            inputs, seconds = rocksdb_compaction(db_log)
            row.update(comp_input_bytes=inputs, comp_seconds=seconds)
            row["stall_s"] = rocksdb_stall(log)
            if row["stall_s"] is not None:
                row["stall_note"] = "rocksdb.stats Cumulative stall"
    if row.get("comp_seconds"):
        row["comp_mb_s"] = row["comp_input_bytes"] / MB / row["comp_seconds"]
    wall, cpu = read_time(time_file)
    row.update(wall_s=wall, cpu_s=cpu, db_bytes=int(db_bytes) if db_bytes.isdigit() else None)
    if cpu is not None:
        row["cpu_us_per_op"] = cpu * 1e6 / int(num)
    if timeline and os.path.exists(timeline):
        row["timeline"] = os.path.basename(timeline)
    row["note"] = "; ".join(notes) if notes else None
    emit(row)


def read_row(engine, value, repeat, num, reads, log, time_file, json_path=None):
    row = {"engine": engine, "value_size": value, "repeat": repeat, "num": num, "phase": "read",
           "status": "ok", "reads": reads}
    if json_path and os.path.exists(json_path):
        rows, _ = json_rows(json_path)
    else:
        rows, _ = text_rows(log)
    b = benchmark_row(rows, "readrandom")
    if b is None:
        row.update(status="failed", note="no readrandom line in " + os.path.basename(log))
        emit(row)
        return
    us = number(b["us"])
    row.update(us_per_op=us, avg_us=number(b["avg"]), p99_us=number(b["p99"]),
               p999_us=number(b["p999"]), found=found_count(b["message"]))
    if us:
        row["ops_s"] = 1e6 / us
    wall, cpu = read_time(time_file)
    row.update(wall_s=wall, cpu_s=cpu)
    if cpu is not None:
        row["cpu_us_per_op"] = cpu * 1e6 / int(reads)
    emit(row)


def status_row(engine, value, repeat, num, phase, status, note):
    emit({"engine": engine, "value_size": value, "repeat": repeat, "num": num, "phase": phase,
          "status": status, "note": note})


# --- summary.md -------------------------------------------------------------------

def load(out):
    rows = []
    path = os.path.join(out, "results.tsv")
    if not os.path.exists(path):
        return rows
    with open(path) as file:
        header = file.readline().rstrip("\n").split("\t")
        for line in file:
            cells = line.rstrip("\n").split("\t")
            if len(cells) != len(header):
                continue  # a line cut short by a kill
            rows.append(dict(zip(header, cells)))
    return rows


def load_meta(out):
    meta = {}
    path = os.path.join(out, "meta.tsv")
    if os.path.exists(path):
        with open(path) as file:
            for line in file:
                key, _, value = line.rstrip("\n").partition("\t")
                meta.setdefault(key, []).append(value)
    return meta


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def show(value, fmt):
    return "—" if value is None else fmt % value


def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else "%.2f" % (a / b)


def table(lines, header, rows, text_columns=1):
    """A markdown table: the first `text_columns` columns, and a last one
    named `note`, left-aligned; the numbers right-aligned."""
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" if i < text_columns or h == "note" else "---:"
                                for i, h in enumerate(header)) + "|")
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    lines.append("")


def summary(out):
    rows = load(out)
    meta = load_meta(out)
    get = lambda key, default="?": (meta.get(key) or [default])[0]
    engines = get("engines", "").split(",") if get("engines", "") else []
    for r in rows:
        if r["engine"] not in engines:
            engines.append(r["engine"])
    shales = [e for e in engines if family(e) == "shale"]
    others = [e for e in ("leveldb", "rocksdb") if e in engines]
    sizes = []
    for v in get("value_sizes", "").split(",") + [r["value_size"] for r in rows]:
        if v and v not in sizes:
            sizes.append(v)
    ok = [r for r in rows if r["status"] == "ok"]

    def values(phase, engine, size, column):
        return [number(r[column]) for r in ok
                if r["phase"] == phase and r["engine"] == engine and r["value_size"] == size]

    def med(phase, engine, size, column):
        return median(values(phase, engine, size, column))

    def nums(size):
        got = sorted({r["num"] for r in rows if r["value_size"] == size and r["status"] == "ok"})
        return got

    def label(size):
        got = nums(size)
        requested = get("num")
        if got and got != [requested]:
            return "%s B (num %s)" % (size, ", ".join(got))
        return "%s B" % size

    lines = []
    lines.append("# The GPU compaction paper's experiment: ShaleDB, LevelDB 1.23, RocksDB")
    lines.append("")
    lines.append("Command: `%s`" % get("command"))
    lines.append("")
    lines.append("- commit %s%s; started %s" % (get("commit"), " (dirty working tree)" if get("dirty") == "yes" else "",
                                              get("started")))
    lines.append("- machine: %s cores (%s), %s GiB memory; database folder %s (%s free at the start)"
                 % (get("cores"), get("cpu_model"), get("memory_gib"), get("db_dir"), get("db_free")))
    lines.append("- workload: fillrandom of %s pairs (16-byte keys; values of %s bytes, "
                 "compression_ratio 0.5, Snappy), one writer, `--histogram=1`; then readrandom "
                 "(%s reads) in a second process with `--use_existing_db=1 --seed=%s`"
                 % (get("num"), get("value_sizes"), get("reads"), get("read_seed")))
    lines.append("- shape `%s`: %s" % (get("shape"), get("shape_text")))
    lines.append("- engines: %s; %s repeat(s), engines alternating within each"
                 % (", ".join(engines) or "none", get("repeats")))
    done = [r for r in rows if r["phase"] == "read" and r["status"] == "ok"]
    fills = [r for r in rows if r["phase"] == "fill" and r["status"] == "ok"]
    lines.append("- measured: %d of %s planned, %d readrandoms after them" % (len(fills), get("planned"), len(done)))
    for note in meta.get("note", []):
        lines.append("- " + note)
    if os.path.exists(os.path.join(out, "interrupted")):
        with open(os.path.join(out, "interrupted")) as file:
            lines.append("- **cut short**: " + file.read().strip())
    lines.append("")
    lines.append("Medians over the repeats. Ratios are ShaleDB engine / other engine: above 1 is "
                 "better for ShaleDB in MB/s and ops/s, below 1 in microseconds, CPU and stalls. "
                 "MB is 2^20 bytes. Every run's output is in `logs/`, its figures in `results.tsv`.")
    lines.append("")

    def figure(title, phase, column, fmt, explain, scale=1.0):
        lines.append("## " + title)
        lines.append("")
        if explain:
            lines.append(explain)
            lines.append("")
        header = ["value"] + engines
        for s in shales:
            for o in others:
                header.append("%s / %s" % (s, o))
        body = []
        for size in sizes:
            m = {e: med(phase, e, size, column) for e in engines}
            m = {e: None if v is None else v * scale for e, v in m.items()}
            line = [label(size)] + [show(m[e], fmt) for e in engines]
            for s in shales:
                for o in others:
                    line.append(ratio(m[s], m[o]))
            body.append(line)
        table(lines, header, body)

    figure("Fig. 10: compaction throughput during the fill (MB/s)", "fill", "comp_mb_s", "%.1f",
           "Compaction input bytes over compaction seconds (the FPGA paper's definition), per "
           "engine:\n\n" + "\n".join("- " + COMPACTION_METHODS[f] for f in ("shale", "leveldb", "rocksdb")
                                     if any(family(e) == f for e in engines))
           + "\n\n— where the fill ran no compaction.")
    figure("Fig. 11: fillrandom throughput (thousand puts per second)", "fill", "ops_s", "%.1f",
           "Puts over the fill's own seconds (db_bench's report line; its MB/s and micros/op are "
           "in the next tables).", scale=1e-3)
    figure("Fig. 11, as db_bench prints it: fillrandom MB/s", "fill", "mb_s", "%.1f", None)
    figure("Fig. 11, as db_bench prints it: fillrandom micros/op", "fill", "us_per_op", "%.3f", None)

    lines.append("## Fig. 12: throughput over time during the fill")
    lines.append("")
    if os.path.exists(os.path.join(out, "fig12-fill-timeline.png")):
        lines.append("![Fig. 12](fig12-fill-timeline.png)")
        lines.append("")
        lines.append("`fig12-fill-timeline.png`: puts per second in each %s-second interval, one "
                     "panel per value size, one line per engine (each engine's first repeat); "
                     "the CSVs are `logs/*-fill.timeline.csv`." % get("timeline_interval"))
    else:
        lines.append("No PNG yet (%s)." % get("plot_note", "no fill has finished"))
    lines.append("")

    def latency(title, phase, extra):
        lines.append("## " + title)
        lines.append("")
        header = ["value"]
        for e in engines:
            header += ["%s %s" % (e, c) for c, _ in extra]
        body = []
        for size in sizes:
            line = [label(size)]
            for e in engines:
                for _, (column, fmt) in extra:
                    line.append(show(med(phase, e, size, column), fmt))
            body.append(line)
        table(lines, header, body)
        if shales and others:
            header = ["value", "ShaleDB engine"]
            for o in others:
                header += ["%s / %s" % (c, o) for c, _ in extra]
            body = []
            for size in sizes:
                for s in shales:
                    line = [label(size), s]
                    for o in others:
                        for _, (column, _) in extra:
                            line.append(ratio(med(phase, s, size, column), med(phase, o, size, column)))
                    body.append(line)
            lines.append("Ratios:")
            lines.append("")
            table(lines, header, body, text_columns=2)

    latency("Table I: write latency of the fill (microseconds)", "fill",
            [("Avg", ("avg_us", "%.3f")), ("P99", ("p99_us", "%.3f")), ("P99.9", ("p999_us", "%.3f"))])
    latency("Table II: readrandom after the fill (microseconds)", "read",
            [("Avg", ("avg_us", "%.3f")), ("P99", ("p99_us", "%.3f")), ("P99.9", ("p999_us", "%.3f"))])
    lines.append("Reads that found their key (they should be about 63 %: the fill writes "
                 "`--num` random keys of `--num`, so 1 - 1/e of them are distinct):")
    lines.append("")
    body = []
    for size in sizes:
        line = [label(size)]
        for e in engines:
            found = [(number(r["found"]), number(r["reads"])) for r in ok
                     if r["phase"] == "read" and r["engine"] == e and r["value_size"] == size]
            shares = [f / n * 100 for f, n in found if f is not None and n]
            line.append(show(median(shares), "%.1f %%"))
        body.append(line)
    table(lines, ["value"] + engines, body)

    lines.append("## Beside each fill")
    lines.append("")
    lines.append("CPU: user + system seconds of the fill's process (`/usr/bin/time`), per put. Write "
                 "amplification: each engine's own line. Stalls: ShaleDB's engine summary (slowed "
                 "down + stopped); RocksDB's `Cumulative stall` (rocksdb.stats); LevelDB exposes "
                 "none (—): the note counts the `waiting...` lines of its LOG, each a writer "
                 "stopped for a full memtable or too many L0 files (for how long is not logged, "
                 "and the 1 ms slowdowns at 8 L0 files are not logged at all). Size: `du -sb` of the "
                 "database after the fill. Wall: the fill process, open and close included.")
    lines.append("")
    header = ["value", "engine", "repeat", "CPU us/put", "write amp", "stalls s", "size MB", "wall s", "note"]
    body = []
    for size in sizes:
        for r in ok:
            if r["value_size"] != size or r["phase"] != "fill":
                continue
            note = [x for x in (r["stall_note"], r["note"]) if x and x != "-"]
            db = number(r["db_bytes"])
            body.append([label(size), r["engine"], r["repeat"], show(number(r["cpu_us_per_op"]), "%.2f"),
                         show(number(r["write_amp"]), "%.2f"), show(number(r["stall_s"]), "%.3f"),
                         show(db / MB if db is not None else None, "%.1f"),
                         show(number(r["wall_s"]), "%.1f"), "; ".join(note)])
    table(lines, header, body, text_columns=2)
    body = [[label(r["value_size"]), r["engine"], r["repeat"], r["phase"], r["status"], r["note"]]
            for r in rows if r["status"] != "ok"]
    if body:
        lines.append("## Runs not measured")
        lines.append("")
        table(lines, ["value", "engine", "repeat", "phase", "status", "why"], body, text_columns=6)
    lines.append("## Configuration differences")
    lines.append("")
    for note in meta.get("config", []):
        lines.append("- " + note)
    lines.append("")
    path = os.path.join(out, "summary.md")
    with open(path + ".tmp", "w") as file:
        file.write("\n".join(lines))
    os.replace(path + ".tmp", path)


def series(out):
    """The fill timelines to draw: each engine's first repeat per value size,
    as `--series PANEL LABEL FILE` lines."""
    seen = set()
    for r in load(out):
        if r["phase"] != "fill" or r["status"] != "ok" or r["timeline"] in ("", "-"):
            continue
        key = (r["value_size"], r["engine"])
        if key in seen:
            continue
        seen.add(key)
        print("--series")
        print("values of %s bytes, %s puts" % (r["value_size"], r["num"]))
        print(r["engine"])
        print(os.path.join(out, "logs", r["timeline"]))


def main(argv):
    command, args = argv[0], argv[1:]
    if command == "header":
        print("\t".join(COLUMNS))
    elif command == "fill-row":
        fill_row(*args)
    elif command == "read-row":
        read_row(*args)
    elif command == "status-row":
        status_row(*args)
    elif command == "summary":
        summary(*args)
    elif command == "series":
        series(*args)
    else:
        sys.exit("reproduce.py: unknown command " + command)


if __name__ == "__main__":
    main(sys.argv[1:])
