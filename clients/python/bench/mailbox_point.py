"""Point reads and inserts of mailbox messages: the Python client against
Doppio, and psycopg against PostgreSQL, in the same run.

Both hold the mailbox benchmark's shape (bench/mailbox): messages keyed
by (mailbox id, message id) with a JSON document; PostgreSQL's table is
``messages(mailbox_id text, message_id bigint, doc jsonb, PRIMARY KEY
(mailbox_id, message_id))``. Each phase runs ``--clients`` threads for
``--seconds`` and prints throughput and latency percentiles.

    python mailbox_point.py --doppio-bin ./doppio --seconds 10

starts a private ``doppio dev`` and a private PostgreSQL cluster (initdb
and pg_ctl from PATH or /usr/lib/postgresql; run as user postgres when
root) in a temporary directory; ``--doppio-url`` and ``--pg-dsn`` use
running ones instead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable

import psycopg

import doppio

DB = "mbench"
SCHEMA = {
    "type": "record",
    "name": "Message",
    "fields": [
        {"name": "from", "type": "string"},
        {"name": "subject", "type": "string"},
        {"name": "folder", "type": "string"},
        {"name": "size", "type": "long"},
    ],
}


def message(rng: random.Random, i: int) -> dict[str, object]:
    return {"from": f"user{rng.randrange(1000)}@example.com", "subject": f"message {i}", "folder": rng.choice(["inbox", "sent", "archive"]), "size": rng.randrange(100, 100_000)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_doppio(binary: str, data: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start `doppio dev` on data and return it with its base URL."""
    port = free_port()
    proc = subprocess.Popen([binary, "dev", "--data", data, "--http", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    for raw in proc.stderr:
        if b"doppio node ready" in raw:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
            return proc, f"http://127.0.0.1:{port}"
    raise RuntimeError("doppio dev exited before it was ready")


def pg_bin() -> str:
    if shutil.which("initdb"):
        return os.path.dirname(shutil.which("initdb") or "")
    versions = sorted(os.listdir("/usr/lib/postgresql"), key=int) if os.path.isdir("/usr/lib/postgresql") else []
    if not versions:
        raise RuntimeError("PostgreSQL's initdb not found (apt-get install postgresql)")
    return f"/usr/lib/postgresql/{versions[-1]}/bin"


def as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def start_postgres(root: str) -> tuple[Callable[[], None], str]:
    """initdb and start a private PostgreSQL cluster; return its stop and DSN."""
    data, port, bindir = os.path.join(root, "pg"), free_port(), pg_bin()
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        os.makedirs(data, mode=0o700)
        shutil.chown(data, "postgres", "postgres")
    subprocess.run(as_postgres([f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"]), check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(data, "postgresql.conf"), "a") as f:
        f.write(f"listen_addresses = '127.0.0.1'\nunix_socket_directories = '{data}'\nport = {port}\nfsync = on\nsynchronous_commit = on\n")
    subprocess.run(as_postgres([f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(data, "server.log"), "-w", "start"]), check=True, stdout=subprocess.DEVNULL)

    def stop() -> None:
        subprocess.run(as_postgres([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]), stdout=subprocess.DEVNULL, check=False)

    return stop, f"host=127.0.0.1 port={port} user=postgres dbname=postgres"


def run_phase(name: str, clients: int, seconds: float, op: Callable[[int, random.Random, int], None]) -> dict[str, float]:
    """Run op(client, rng, n) from clients threads for seconds; return stats."""
    lat: list[list[float]] = [[] for _ in range(clients)]
    stop = time.monotonic() + seconds

    def worker(w: int) -> None:
        rng, n = random.Random(w), 0
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            op(w, rng, n)
            lat[w].append(time.perf_counter() - t0)
            n += 1

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    all_lat = sorted(x for l in lat for x in l)
    pct = lambda q: all_lat[min(len(all_lat) - 1, int(q * len(all_lat)))] * 1000 if all_lat else float("nan")  # noqa: E731
    return {"ops": len(all_lat), "ops_per_s": len(all_lat) / elapsed, "p50_ms": pct(0.50), "p99_ms": pct(0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--doppio-url", help="a running Doppio (default: start `doppio dev` from --doppio-bin)")
    ap.add_argument("--doppio-bin", default="doppio")
    ap.add_argument("--pg-dsn", help="a running PostgreSQL (default: start a private one)")
    ap.add_argument("--mailboxes", type=int, default=100)
    ap.add_argument("--messages", type=int, default=50, help="messages per mailbox loaded first")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30, help="length of each phase, per system")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="mailbox-point-")
    stops: list[Callable[[], None]] = []
    try:
        url = args.doppio_url
        if not url:
            proc, url = start_doppio(args.doppio_bin, os.path.join(root, "doppio"))
            stops.append(lambda: (proc.kill(), proc.wait()))
        dsn = args.pg_dsn
        if not dsn:
            stop_pg, dsn = start_postgres(root)
            stops.append(stop_pg)

        c = doppio.Client(url)
        c.put_database(DB, partitions=8)
        c.put_table(DB, "Message", key=[{"name": "mailboxId", "type": "string"}, {"name": "messageId", "type": "long"}], schema=SCHEMA)
        with psycopg.connect(dsn, autocommit=True) as pg:
            pg.execute("DROP TABLE IF EXISTS messages")
            pg.execute("CREATE TABLE messages (mailbox_id text NOT NULL, message_id bigint NOT NULL, doc jsonb NOT NULL, PRIMARY KEY (mailbox_id, message_id))")
            rng = random.Random(1)
            for m in range(args.mailboxes):
                docs = [message(rng, i) for i in range(args.messages)]
                c.batch(DB, [doppio.put_op("Message", [f"mb{m}", i], d) for i, d in enumerate(docs)])
                with pg.cursor().copy("COPY messages (mailbox_id, message_id, doc) FROM STDIN") as cp:
                    for i, d in enumerate(docs):
                        cp.write_row((f"mb{m}", i, json.dumps(d)))
            pg.execute("VACUUM ANALYZE messages")

        conns = [psycopg.connect(dsn, autocommit=True) for _ in range(args.clients)]
        read_sql = "SELECT doc FROM messages WHERE mailbox_id = %s AND message_id = %s"
        insert_sql = "INSERT INTO messages (mailbox_id, message_id, doc) VALUES (%s, %s, %s)"

        def key(rng: random.Random) -> tuple[str, int]:
            return f"mb{rng.randrange(args.mailboxes)}", rng.randrange(args.messages)

        def doppio_read(w: int, rng: random.Random, n: int) -> None:
            mb, i = key(rng)
            c.get(DB, "Message", [mb, i])

        def pg_read(w: int, rng: random.Random, n: int) -> None:
            mb, i = key(rng)
            if conns[w].execute(read_sql, (mb, i), prepare=True).fetchone() is None:
                raise RuntimeError(f"absent {mb}/{i}")

        def doppio_insert(w: int, rng: random.Random, n: int) -> None:
            c.put(DB, "Message", [f"mb{rng.randrange(args.mailboxes)}", 1_000_000 * (w + 1) + n], message(rng, n), if_none_match="*")

        def pg_insert(w: int, rng: random.Random, n: int) -> None:
            conns[w].execute(insert_sql, (f"mb{rng.randrange(args.mailboxes)}", 1_000_000 * (w + 1) + n, json.dumps(message(rng, n))), prepare=True)

        print(f"mailbox point ops: {args.clients} client threads, {args.seconds:g}s per phase, {args.mailboxes}x{args.messages} messages loaded; Python {sys.version.split()[0]}, doppio {url}, psycopg {psycopg.__version__}")
        print(f"{'phase':<12} {'system':<22} {'ops/s':>10} {'p50 ms':>9} {'p99 ms':>9}")
        for phase, ops in (("point-read", (("doppio (python)", doppio_read), ("postgres (psycopg)", pg_read))), ("insert", (("doppio (python)", doppio_insert), ("postgres (psycopg)", pg_insert)))):
            for system, op in ops:
                s = run_phase(phase, args.clients, args.seconds, op)
                print(f"{phase:<12} {system:<22} {s['ops_per_s']:>10.0f} {s['p50_ms']:>9.2f} {s['p99_ms']:>9.2f}", flush=True)
        for conn in conns:
            conn.close()
        return 0
    finally:
        for stop in reversed(stops):
            stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
