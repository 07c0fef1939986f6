"""Smart routing and retries against `doppio dev --nodes 3`, killing a
node with SIGKILL mid-test (DOPPIO_NODES: id=url=pid,...)."""

from __future__ import annotations

import os
import signal
import socket

import doppio
from doppio import put_op

from conftest import env, eventually

DB = "pyc"
PARTITIONS = 3


def leaders(c: doppio.Client) -> dict[int, str]:
    """Partition -> leader node id, from the cluster view."""
    return {p["partition"]: p.get("leader", "") for p in c.cluster()["partitions"] if p["database"] == DB}


def refused(url: str) -> bool:
    """Whether a connection to url's host and port is refused."""
    host, port = url.split("://")[1].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_routes_follow_leaders_and_writes_survive_a_kill() -> None:
    nodes = {}
    for item in env("DOPPIO_NODES").split(","):
        nid, url, pid = item.split("=")
        nodes[nid] = (url, int(pid))
    url_of = {nid: url for nid, (url, _) in nodes.items()}
    setup = doppio.Client(url_of["n1"], retry=30)
    setup.put_database(DB, partitions=PARTITIONS, replicas=3)
    setup.put_table(DB, "T", key=[{"name": "id", "type": "string"}], schema={"type": "record", "name": "T", "fields": [{"name": "v", "type": "long"}]})
    lead = eventually("a leader for every partition", lambda: (lambda l: l if len(l) == PARTITIONS and all(l.values()) else None)(leaders(setup)))
    # The client's seed is a node not leading k0's partition.
    victim = lead[doppio.partition_of("k0", PARTITIONS)]
    seed = min(set(nodes) - {victim})
    c = doppio.Client(url_of[seed], smart_routing=0.5, retry=30)

    for i in range(30):
        c.put(DB, "T", [f"k{i}"], {"v": i})
    # Each key goes to its partition's leader, as the cluster view names it.
    lead = leaders(c)
    for i in range(30):
        assert c.route_for(DB, f"k{i}") == url_of[lead[doppio.partition_of(f"k{i}", PARTITIONS)]], f"k{i}"
    # Leaders may have moved since: the victim is one that leads now.
    victim = next((nid for nid in lead.values() if nid != seed), "")
    assert victim, f"the seed {seed} leads every partition: {lead}"
    victim_key = next(f"k{i}" for i in range(30) if lead[doppio.partition_of(f"k{i}", PARTITIONS)] == victim)
    assert c.route_for(DB, victim_key) == url_of[victim]
    # A transaction is routed by its partition key too.
    r = c.txn(DB, [put_op("T", ["k0"], {"v": 100})])
    assert r.scn

    # Kill -9 a leader; the next write to it finds it gone, goes through
    # the seed and waits out the election.
    os.kill(nodes[victim][1], signal.SIGKILL)
    eventually("the killed node's port refuses connections", lambda: refused(url_of[victim]))
    c.put(DB, "T", [victim_key], {"v": -1})
    for i in range(30, 60):
        c.put(DB, "T", [f"k{i}"], {"v": i})
    for i in range(60):
        want = -1 if f"k{i}" == victim_key else 100 if i == 0 else i
        assert c.get(DB, "T", [f"k{i}"]).body == {"v": want}, f"k{i}"
    # The view moved on: no partition is led by the dead node, and routes
    # no longer name it.
    after = eventually("leaders away from the killed node", lambda: (lambda l: l if len(l) == PARTITIONS and all(l.values()) and victim not in l.values() else None)(leaders(c)), timeout=30)
    survivor = doppio.Client(url_of[max(set(nodes) - {victim})], retry=30)
    assert survivor.get(DB, "T", ["k59"]).body == {"v": 59}
    assert all(c.route_for(DB, f"k{i}") != url_of[victim] for i in range(60))
    assert set(after.values()) <= set(nodes) - {victim}
