"""The client against one `doppio dev` node (DOPPIO_URL)."""

from __future__ import annotations

from datetime import datetime

import pytest

import doppio
from doppio import delete_op, insert_op, patch_op, put_op

from conftest import env, eventually, tls_options

DB = "pyn"
PARTITIONS = 4
MESSAGE = {
    "type": "record",
    "name": "Message",
    "fields": [
        {"name": "subject", "type": "string", "index": "text"},
        {"name": "folder", "type": "string", "index": "attribute"},
        {"name": "size", "type": "long", "index": "attribute"},
    ],
}
MAILBOX = {"type": "record", "name": "Mailbox", "fields": [{"name": "unread", "type": "long"}]}


@pytest.fixture(scope="module")
def c() -> doppio.Client:
    client = doppio.Client(env("DOPPIO_URL"), **tls_options())
    _, created = client.put_database(DB, partitions=PARTITIONS)
    assert created
    _, again = client.put_database(DB, partitions=PARTITIONS)
    assert not again
    client.put_table(DB, "Message", key=[{"name": "mailboxId", "type": "string"}, {"name": "messageId", "type": "long", "autoIncrement": True}], schema=MESSAGE)
    client.put_table(DB, "Mailbox", key=[{"name": "mailboxId", "type": "string"}], schema=MAILBOX)
    return client


def message(subject: str, folder: str, size: int) -> dict[str, object]:
    return {"subject": subject, "folder": folder, "size": size}


def test_schemas_and_index_status(c: doppio.Client) -> None:
    t = c.get_table(DB, "Message")
    assert t["version"] == 1
    assert [k["name"] for k in t["key"]] == ["mailboxId", "messageId"]
    assert c.get_table_version(DB, "Message", 1)["version"] == 1
    assert sorted(t["name"] for t in c.get_database(DB)["tables"]) == ["Mailbox", "Message"]
    ready = eventually("every index ready", lambda: all(i.state == "ready" for i in c.index_status(DB, "Message")))
    assert ready
    assert sorted((i.field, i.kind) for i in c.index_status(DB, "Message")) == [("folder", "attribute"), ("size", "attribute"), ("subject", "text")]
    # A key change is incompatible: 409, and the table stays at version 1.
    with pytest.raises(doppio.Conflict) as e:
        c.put_table(DB, "Mailbox", key=[{"name": "mailboxId", "type": "long"}], schema=MAILBOX)
    assert e.value.status == 409
    assert c.get_table(DB, "Mailbox")["version"] == 1
    with pytest.raises(doppio.NotFound):
        c.get_table(DB, "Nope")


def test_documents_etags_and_conditionals(c: doppio.Client) -> None:
    w = c.put(DB, "Mailbox", ["alice"], {"unread": 0})
    assert w.created and w.etag.startswith('"') and w.scn
    w2 = c.put(DB, "Mailbox", ["alice"], {"unread": 1})
    assert not w2.created and w2.etag != w.etag
    d = c.get(DB, "Mailbox", ["alice"])
    assert d.body == {"unread": 1}
    assert d.etag == w2.etag
    assert d.schema_version == 1
    assert isinstance(d.last_modified, datetime)
    with pytest.raises(doppio.NotModified):
        c.get(DB, "Mailbox", ["alice"], if_none_match=d.etag)
    # False conditions answer 412 and change nothing.
    with pytest.raises(doppio.PreconditionFailed) as e:
        c.put(DB, "Mailbox", ["alice"], {"unread": 9}, if_match=w.etag)
    assert e.value.status == 412 and e.value.type.endswith("/precondition-failed")
    with pytest.raises(doppio.PreconditionFailed):
        c.put(DB, "Mailbox", ["alice"], {"unread": 9}, if_none_match="*")
    with pytest.raises(doppio.PreconditionFailed):
        c.delete(DB, "Mailbox", ["alice"], if_match=w.etag)
    assert c.get(DB, "Mailbox", ["alice"]).body == {"unread": 1}
    # True ones apply.
    w3 = c.put(DB, "Mailbox", ["alice"], {"unread": 2}, if_match=d.etag)
    p = c.patch(DB, "Mailbox", ["alice"], inc={"unread": 3}, if_match=w3.etag)
    assert c.get(DB, "Mailbox", ["alice"]).body == {"unread": 5}
    assert p.etag != w3.etag
    assert c.put(DB, "Mailbox", ["bob"], {"unread": 0}, if_none_match="*").created
    c.delete(DB, "Mailbox", ["alice"])
    with pytest.raises(doppio.NotFound) as nf:
        c.get(DB, "Mailbox", ["alice"])
    assert nf.value.status == 404 and nf.value.detail
    with pytest.raises(doppio.NotFound):
        c.delete(DB, "Mailbox", ["alice"])


def test_collections_paging_multiget_and_projection(c: doppio.Client) -> None:
    keys = [c.insert(DB, "Message", ["bob"], message(f"hello {i}", "inbox" if i % 2 else "sent", 10 * i)).key for i in range(1, 6)]
    assert keys == [["bob", i] for i in range(1, 6)]
    page = c.list(DB, "Message", ["bob"], limit=2)
    assert [d.key for d in page.documents] == [["bob", 1], ["bob", 2]] and page.next
    assert [d.key for d in c.iter(DB, "Message", ["bob"], page_size=2)] == keys
    got = c.multi_get(DB, "Message", ["bob"], [1, 3, 99])
    assert [(d.key, d.body["size"]) for d in got] == [(["bob", 1], 10), (["bob", 3], 30)]
    assert c.get(DB, "Message", ["bob", 4], fields=["subject"]).body == {"subject": "hello 4"}
    assert [d.body for d in c.iter(DB, "Message", ["bob"], fields=["size"])] == [{"size": 10 * i} for i in range(1, 6)]
    # Keys that need escaping travel as one path segment each.
    odd = "a/b,(c). é"
    c.put(DB, "Message", [odd, 7], message("odd", "inbox", 1))
    assert c.get(DB, "Message", [odd, 7]).body["subject"] == "odd"
    assert [d.key for d in c.multi_get(DB, "Message", [odd], [7])] == [[odd, 7]]
    assert c.delete_collection(DB, "Message", [odd]) == 1


def test_queries_and_counts(c: doppio.Client) -> None:
    for i in range(1, 4):
        c.put(DB, "Message", ["carl", i], message(f"note {i}", "inbox", i))
    inbox = [d.key for d in c.query(DB, "Message", "folder:inbox", ["bob"], sort="-size")]
    assert inbox == [["bob", 5], ["bob", 3], ["bob", 1]]
    assert c.count(DB, "Message", "folder:inbox", ["bob"]) == 3
    assert c.count(DB, "Message", "folder:inbox") == 6
    wide = [d.key for d in c.query(DB, "Message", "size:[0 TO 3]", sort="size", page_size=2)]
    assert wide == [["carl", 1], ["carl", 2], ["carl", 3]]
    assert [d.body for d in c.query(DB, "Message", "hello", ["bob"], sort="size", fields=["size"])] == [{"size": 10 * i} for i in range(1, 6)]


def test_schema_mismatch_is_unprocessable(c: doppio.Client) -> None:
    with pytest.raises(doppio.Unprocessable) as e:
        c.put(DB, "Mailbox", ["dora"], {"unread": "many"})
    assert e.value.status == 422
    with pytest.raises(doppio.NotFound):
        c.get(DB, "Mailbox", ["dora"])
    with pytest.raises(doppio.BadRequest):
        c.get(DB, "Message", ["bob", "not-a-number"])


def test_transactions_and_batches(c: doppio.Client) -> None:
    r = c.txn(DB, [put_op("Mailbox", ["erin"], {"unread": 1}), insert_op("Message", ["erin"], message("welcome", "inbox", 7))])
    assert r.scn and [o.key for o in r.results] == [["erin"], ["erin", 1]]
    assert r.results[0].created
    r2 = c.txn(DB, [patch_op("Mailbox", ["erin"], inc={"unread": 1}), delete_op("Message", ["erin", 1])], partition_key="erin")
    assert r2.results[1].deleted == 1
    assert c.get(DB, "Mailbox", ["erin"]).body == {"unread": 2}
    # All or nothing: a false condition on the second operation.
    with pytest.raises(doppio.PreconditionFailed) as e:
        c.txn(DB, [put_op("Message", ["erin", 2], message("x", "inbox", 1)), put_op("Mailbox", ["erin"], {"unread": 0}, if_none_match="*")])
    assert e.value.operation == 1
    with pytest.raises(doppio.NotFound):
        c.get(DB, "Message", ["erin", 2])
    with pytest.raises(doppio.BadRequest):
        c.txn(DB, [put_op("Mailbox", ["erin"], {"unread": 0}), put_op("Mailbox", ["fred"], {"unread": 0})])
    results = c.batch(DB, [put_op("Mailbox", ["gil"], {"unread": 1}), put_op("Mailbox", ["hal"], {"unread": 2}), delete_op("Mailbox", ["nobody"])])
    assert [b.status for b in results] == [201, 201, 404]
    assert results[0].result is not None and results[0].result.key == ["gil"]
    assert isinstance(results[2].error, doppio.NotFound)
    assert c.get(DB, "Mailbox", ["hal"]).body == {"unread": 2}


def test_idempotency_keys_answer_the_first_outcome(c: doppio.Client) -> None:
    first = c.insert(DB, "Message", ["ida"], message("once", "inbox", 1), idempotency_key="py-insert-1")
    again = c.insert(DB, "Message", ["ida"], message("once", "inbox", 1), idempotency_key="py-insert-1")
    assert again == first and first.key == ["ida", 1]
    with pytest.raises(doppio.Unprocessable):
        c.insert(DB, "Message", ["ida"], message("other", "inbox", 1), idempotency_key="py-insert-1")
    t1 = c.txn(DB, [insert_op("Message", ["ida"], message("t", "inbox", 2))], idempotency_key="py-txn-1")
    t2 = c.txn(DB, [insert_op("Message", ["ida"], message("t", "inbox", 2))], idempotency_key="py-txn-1")
    assert t1 == t2
    # Without a key of the caller's, each call is a request of its own.
    c.insert(DB, "Message", ["ida"], message("twice", "inbox", 3))
    c.insert(DB, "Message", ["ida"], message("twice", "inbox", 3))
    assert len(c.list(DB, "Message", ["ida"]).documents) == 4
    with pytest.raises(doppio.BadRequest):
        c.insert(DB, "Message", ["ida"], message("x", "inbox", 1), idempotency_key="k" * 256)


def test_change_stream_checkpoints_and_whole_transactions(c: doppio.Client) -> None:
    part = doppio.partition_of("ivy", PARTITIONS)
    with c.changes(DB, tables=["Mailbox", "Message"], read_timeout=10) as s:
        # The stream starts at the newest commit: the transaction is next.
        r = c.txn(DB, [put_op("Mailbox", ["ivy"], {"unread": 1}), put_op("Message", ["ivy", 1], message("a", "inbox", 1)), put_op("Message", ["ivy", 2], message("b", "inbox", 2))])
        t = next(s.transactions())
        assert t.scn == r.scn and t.partition == part
        # The server's partition of the key is the client's.
        assert all(ev.partition == part for ev in t.events)
        assert [(ev.table, ev.key, ev.op) for ev in t.events] == [("Mailbox", ["ivy"], "insert"), ("Message", ["ivy", 1], "insert"), ("Message", ["ivy", 2], "insert")]
        assert [ev.txn_end for ev in t.events] == [False, False, True]
        assert t.events[1].after == message("a", "inbox", 1) and t.events[1].before is None
        checkpoint = s.checkpoint
        assert checkpoint == t.checkpoint
    w = c.patch(DB, "Mailbox", ["ivy"], set={"unread": 4})
    with c.changes(DB, checkpoint=checkpoint, read_timeout=10) as s:
        ev = next(iter(s))
        assert (ev.scn, ev.key, ev.op, ev.before, ev.after, ev.txn_end) == (w.scn, ["ivy"], "update", {"unread": 1}, {"unread": 4}, True)
    with pytest.raises(doppio.BadRequest):
        c.changes(DB, checkpoint="not-a-checkpoint")


def test_over_quota_is_retried_after_retry_after(c: doppio.Client) -> None:
    c.put_database("pyq", partitions=1)
    c.put_table("pyq", "Mailbox", key=[{"name": "mailboxId", "type": "string"}], schema=MAILBOX)
    c.set_quota("databases", "pyq", write_units=2)
    impatient = doppio.Client(c.base, retry=0, **tls_options())

    written = iter(range(1000))

    def refused() -> tuple[doppio.OverQuota, str] | None:
        for _ in range(50):
            key = f"q{next(written)}"
            try:
                impatient.put("pyq", "Mailbox", [key], {"unread": 1})
            except doppio.OverQuota as e:
                return e, key
        return None

    e, key = eventually("a write over the quota refused", refused)
    assert e.status == 429 and e.retry_after and e.retry_after > 0
    assert e.type.endswith("/over-quota") and isinstance(e, doppio.TooManyRequests)
    # Refused before any work: the document was not written.
    with pytest.raises(doppio.NotFound):
        c.get("pyq", "Mailbox", [key])
    # The default client waits for the quota's credit and succeeds.
    patient = doppio.Client(c.base, retry=15, **tls_options())
    for i in range(3):
        patient.put("pyq", "Mailbox", [f"later{i}"], {"unread": i})
    assert patient.get("pyq", "Mailbox", ["later2"]).body == {"unread": 2}
    c.delete_quota("databases", "pyq")
