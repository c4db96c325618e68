"""A hostile client against a real `shale worker` process, in a second
language: the generated Python stubs of crates/shale-compact/proto/worker.proto
and nothing of the Rust client. Every case gets a clear gRPC status, and
afterwards the worker still serves a good job and the database directory
holds nothing it did not hold before (docs/remote.md, "Nobody gets in").

Run by scripts/test-hostile (CI runs it from scripts/test).
"""

import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest

import worker_pb2 as pb
import worker_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SHALE = os.environ["SHALE_BIN"]
GOOD = "good-token"
WRONG_SCOPE = "other-token"
TAG = b"\x01\x01\x00\x00\x00\x00\x00\x00"  # sequence 1, a value


def shale(*args, stdin=None):
    return subprocess.run(
        [SHALE, *args], input=stdin, capture_output=True, check=True, timeout=120
    )


def make_db(path):
    """A database with a few tables, compacted once so they are at level 1."""
    lines = "".join(
        f"key{(i * 7919) % 3000:06d}\tvalue-{i}-{'x' * (i % 50)}\n" for i in range(6000)
    )
    shale("load", "--db", path, "--write_buffer_size=65536", stdin=lines.encode())
    shale("compact", "--db", path, "--executor", "streaming")


def tree(path):
    """Every path under `path` (files and directories), relative."""
    found = set()
    for base, dirs, files in os.walk(path):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(base, name), path))
    return found


class Worker:
    def __init__(self, root, *extra):
        self.root = root
        self.process = subprocess.Popen(
            # The LOG in its file only: this pipe is read for one line, and
            # LOG lines on stderr would fill it and stall the worker.
            [SHALE, "worker", "--listen", "127.0.0.1:0", "--root", root, "--log_to", "file", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        line = self.process.stdout.readline()
        found = re.search(r"listening on (127\.0\.0\.1:\d+)", line)
        assert found, line
        self.address = found.group(1)
        metrics = re.search(r"metrics on (127\.0\.0\.1:\d+)", line)
        self.metrics_address = metrics.group(1) if metrics else None
        self.channel = grpc.insecure_channel(
            self.address,
            options=[("grpc.max_send_message_length", 256 << 20)],
        )
        self.stub = pb_grpc.CompactionWorkerStub(self.channel)

    def stop(self):
        self.channel.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.metrics_address}/metrics", timeout=10) as r:
            return r.read().decode()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("root"))
    outside = str(tmp_path_factory.mktemp("outside"))
    db = os.path.join(root, "db")
    make_db(db)
    with open(os.path.join(outside, "000900.ldb"), "wb") as f:
        f.write(b"secret")
    # Symlinks a hostile client may try: out of the root, and inside it.
    os.symlink(outside, os.path.join(root, "escape"))
    os.symlink("db", os.path.join(root, "alias"))
    os.symlink(os.path.join(outside, "000900.ldb"), os.path.join(db, "000900.ldb"))
    tables = sorted(n for n in os.listdir(db) if n.endswith(".ldb") and not os.path.islink(os.path.join(db, n)))
    assert tables, os.listdir(db)
    token_file = os.path.join(root, "tokens")
    with open(token_file, "w") as f:
        f.write(f"{GOOD} db escape alias\n{WRONG_SCOPE} elsewhere/*\n")
    worker = Worker(
        root,
        "--token_file", token_file,
        "--executor", "streaming",
        "--max_jobs", "2",
        "--stream_idle_timeout_s", "1",
        "--staging_timeout_s", "2",
        "--metrics_listen", "127.0.0.1:0",
    )
    state = {
        "root": root,
        "db": db,
        "outside": outside,
        "table": int(tables[0].split(".")[0]),
        "worker": worker,
        "before": tree(db),
        "outside_before": tree(outside),
    }
    yield state
    worker.stop()


def md(token=GOOD):
    return (("authorization", f"Bearer {token}"),)


def job(env, number=None, size=None, **fields):
    number = env["table"] if number is None else number
    if size is None:
        size = os.path.getsize(os.path.join(env["db"], f"{number:06d}.ldb"))
    files = [pb.JobFile(number=number, file_size=size, smallest=b"" + TAG, largest=b"\xff" * 8 + TAG)]
    settings = pb.TableSettings(block_size=4096, block_restart_interval=16, bloom_bits_per_key=10, snappy=True)
    message = pb.Job(
        id=1,
        inputs=[pb.InputRun(level=1, files=files)],
        output_level=2,
        max_output_file_size=2 << 20,
        table=settings,
    )
    for key, value in fields.items():
        setattr(message, key, value)
    return message


def request(env, db_path="db", message=None, session=None):
    return pb.CompactRequest(
        db_path=db_path,
        session=session or secrets.token_hex(16),
        job=message if message is not None else job(env),
    )


def run(env, req, token=GOOD):
    """A near-data call to its end: its Done, or the RpcError."""
    for event in env["worker"].stub.Compact(req, metadata=md(token), timeout=60):
        if event.HasField("done"):
            return event.done
    raise AssertionError("no Done")


def refused(env, req, code, text=None, token=GOOD):
    with pytest.raises(grpc.RpcError) as caught:
        run(env, req, token)
    assert caught.value.code() == code, caught.value
    if text is not None:
        assert text in caught.value.details(), caught.value.details()
    return caught.value.details()


def adopt_like_an_engine(env, session):
    """What the engine does after adopting: the session's directory goes."""
    path = os.path.join(env["db"], "staging", session)
    for name in os.listdir(path):
        os.remove(os.path.join(path, name))
    os.rmdir(path)
    try:
        os.rmdir(os.path.join(env["db"], "staging"))
    except OSError:
        pass


def wait_until(check, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def still_serves_and_nothing_new(env):
    session = secrets.token_hex(16)
    done = run(env, request(env, session=session))
    assert done.tables, done
    adopt_like_an_engine(env, session)
    # Sessions of failed jobs are removed at once; those of finished jobs
    # nobody adopts within --staging_timeout_s.
    assert wait_until(lambda: tree(env["db"]) == env["before"]), tree(env["db"]) ^ env["before"]
    assert tree(env["outside"]) == env["outside_before"]


def test_traversal_is_refused(env):
    for path in ["../x", "db/../..", "/etc", env["outside"], ""]:
        refused(env, request(env, db_path=path), grpc.StatusCode.PERMISSION_DENIED, "db_path")
    still_serves_and_nothing_new(env)


def test_symlinks_inside_and_outside_the_root_are_refused(env):
    refused(env, request(env, db_path="escape"), grpc.StatusCode.PERMISSION_DENIED, "symlink")
    refused(env, request(env, db_path="alias"), grpc.StatusCode.PERMISSION_DENIED, "symlink")
    refused(env, request(env, message=job(env, number=900, size=6)), grpc.StatusCode.PERMISSION_DENIED, "symlink")
    still_serves_and_nothing_new(env)


def test_wrapping_and_lying_sizes_are_refused(env):
    real = os.path.getsize(os.path.join(env["db"], f"{env['table']:06d}.ldb"))
    refused(env, request(env, message=job(env, size=real + 1)), grpc.StatusCode.INVALID_ARGUMENT, "file_size")
    wrapping = job(env, size=(1 << 64) - 1)
    other = [n for n in os.listdir(env["db"]) if n.endswith(".ldb") and int(n[:6]) not in (env["table"], 900)]
    if other:
        wrapping.inputs.append(pb.InputRun(level=0, files=[pb.JobFile(number=int(other[0][:6]), file_size=2, smallest=TAG, largest=b"\xff" + TAG)]))
    refused(env, request(env, message=wrapping), grpc.StatusCode.INVALID_ARGUMENT, "file_size")
    still_serves_and_nothing_new(env)


def test_malformed_messages_name_the_field(env):
    cases = []
    empty = job(env)
    empty.inputs[0].files[0].smallest = b""
    cases.append((empty, "smallest"))
    oversized = job(env)
    oversized.inputs[0].files[0].largest = b"k" * (2 << 20)
    cases.append((oversized, "largest"))
    unordered = job(env)
    unordered.inputs[0].files.append(pb.JobFile(number=env["table"] + 1000, file_size=1, smallest=b"a" + TAG, largest=b"b" + TAG))
    cases.append((unordered, "out of order"))
    unknown = job(env, number=987654, size=10)
    cases.append((unknown, "number"))
    backwards = job(env)
    backwards.range_lower = b"q"
    backwards.range_upper = b"c"
    cases.append((backwards, "range_lower"))
    for message, field in cases:
        refused(env, request(env, message=message), grpc.StatusCode.INVALID_ARGUMENT, field)
    refused(env, request(env, session="../../etc"), grpc.StatusCode.INVALID_ARGUMENT, "session")
    # Keys-only: an order before the job, and an empty stream.
    for messages in ([pb.KeysOnlyRequest(order=pb.OrderChunk(codes=[1], last=True))], []):
        with pytest.raises(grpc.RpcError) as caught:
            list(env["worker"].stub.CompactKeysOnly(iter(messages), metadata=md(), timeout=30))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value
    still_serves_and_nothing_new(env)


def test_tokens_and_their_scope(env):
    refused(env, request(env), grpc.StatusCode.UNAUTHENTICATED, token="nope")
    refused(env, request(env), grpc.StatusCode.PERMISSION_DENIED, "scope", token=WRONG_SCOPE)
    # Keys-only obeys the same scope.
    start = pb.KeysOnlyRequest(start=request(env))
    with pytest.raises(grpc.RpcError) as caught:
        list(env["worker"].stub.CompactKeysOnly(iter([start]), metadata=md(WRONG_SCOPE), timeout=30))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, caught.value
    still_serves_and_nothing_new(env)


def test_a_silent_keys_only_stream_is_cancelled(env):
    def silent():
        yield pb.KeysOnlyRequest(start=request(env))
        time.sleep(30)  # never the order

    started = time.time()
    with pytest.raises(grpc.RpcError) as caught:
        for _ in env["worker"].stub.CompactKeysOnly(silent(), metadata=md(), timeout=60):
            pass
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, caught.value
    assert "stream_idle_timeout" in caught.value.details()
    assert time.time() - started < 20
    still_serves_and_nothing_new(env)


CLIENT = r"""
import os, sys, grpc
sys.path.insert(0, sys.argv[1])
import worker_pb2 as pb, worker_pb2_grpc as pb_grpc
request = pb.CompactRequest.FromString(bytes.fromhex(sys.argv[3]))
stub = pb_grpc.CompactionWorkerStub(grpc.insecure_channel(sys.argv[2]))
md = (("authorization", "Bearer good-token"),)
if sys.argv[4] == "near-data-after-done":
    for event in stub.Compact(request, metadata=md):
        if event.HasField("done"):
            print("done", flush=True)
            os._exit(0)
else:
    def requests():
        yield pb.KeysOnlyRequest(start=request)
        yield pb.KeysOnlyRequest(keys_wanted=pb.KeysWanted(run=0, count=1))
        import time; time.sleep(60)
    for event in stub.CompactKeysOnly(requests(), metadata=md):
        if event.HasField("keys"):
            print("keys", flush=True)
            os._exit(0)
"""


@pytest.mark.parametrize("when", ["near-data-after-done", "keys-only-mid-job"])
def test_a_client_killed_leaves_nothing(env, when):
    session = secrets.token_hex(16)
    req = request(env, session=session)
    gen = os.environ["HOSTILE_GEN"]
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, gen, env["worker"].address, req.SerializeToString().hex(), when],
        capture_output=True, text=True, timeout=60,
    )
    assert out.stdout.strip() in ("done", "keys"), out
    staged = os.path.join(env["db"], "staging", session)
    # Mid-job: cancelled at once. After Done: removed when nobody adopts it
    # within --staging_timeout_s (2 s).
    assert wait_until(lambda: not os.path.exists(staged), 10), os.listdir(staged)
    still_serves_and_nothing_new(env)


def test_health_and_metrics(env):
    health = health_pb2_grpc.HealthStub(env["worker"].channel)
    for service in ["", "shale.worker.v1.CompactionWorker"]:
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    text = env["worker"].metrics()
    for name in ["shale_worker_jobs_total", "shale_worker_refusals_total", "shale_worker_staging_bytes",
                 "shale_worker_job_seconds_bucket", "shale_worker_input_bytes_total"]:
        assert name in text, text


def test_a_public_address_needs_a_token(tmp_path):
    out = subprocess.run([SHALE, "worker", "--listen", "0.0.0.0:0", "--root", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--insecure" in out.stderr, out
    process = subprocess.Popen(
        [SHALE, "worker", "--listen", "0.0.0.0:0", "--root", str(tmp_path), "--insecure",
         "--log_to", "file"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert "listening on 0.0.0.0:" in process.stdout.readline()
    finally:
        process.kill()
        process.wait()
