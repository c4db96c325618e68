"""put, get and full iteration through shaledb and through plyvel (real
LevelDB), same keys, same process: `python compare_plyvel.py [N]`.

16-byte keys in random order, 100-byte values, default options of each
module (shaledb: 10-bit Bloom filter and checksum verification on; plyvel:
neither). A benchmark, not a test: see docs/benchmarks.md.
"""

import os
import random
import shutil
import sys
import tempfile
import time

import plyvel
import shaledb


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rng = random.Random(1)
    keys = [b"%016d" % rng.randrange(10**15) for _ in range(count)]
    value = os.urandom(100)
    for name, module in (("plyvel", plyvel), ("shaledb", shaledb)):
        directory = tempfile.mkdtemp()
        db = module.DB(os.path.join(directory, "db"), create_if_missing=True)
        started = time.perf_counter()
        for key in keys:
            db.put(key, value)
        put = time.perf_counter() - started
        order = keys[:]
        rng.shuffle(order)
        started = time.perf_counter()
        for key in order:
            db.get(key)
        get = time.perf_counter() - started
        started = time.perf_counter()
        entries = sum(1 for _ in db)
        iterate = time.perf_counter() - started
        db.close()
        shutil.rmtree(directory)
        print(
            f"{name:8} put {put / count * 1e6:.2f} us  get {get / count * 1e6:.2f} us  "
            f"iterate {iterate / entries * 1e6:.3f} us/entry",
            flush=True,
        )


if __name__ == "__main__":
    main()
