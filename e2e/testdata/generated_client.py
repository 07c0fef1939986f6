"""Drives a client that openapi-python-client generated from the node's
GET /_openapi?keys=split: puts, gets, a collection read, an index query
and a delete of one- and two-part keys, including a key part holding a
slash, all through the generated functions. Exits non-zero on the first
answer that is not the one expected."""

import os
import ssl
import sys

import httpx

from doppio_gen import Client
from doppio_gen.api.documents import (
    delete_documents_2,
    put_document_1,
    put_document_2,
    read_documents_1,
    read_documents_2,
)
from doppio_gen.api.schemas import put_database, put_table
from doppio_gen.models import DatabaseDef, Document, DocumentList


def check(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")
    print(f"ok {what}")


def tls():
    """The secure harness's CA and root's client certificate, if any."""
    ca = os.environ.get("DOPPIO_CA")
    if not ca:
        return None
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(os.environ["DOPPIO_CERT"], os.environ["DOPPIO_KEY"])
    return ctx


def main():
    url, db = os.environ["DOPPIO_URL"], os.environ["DOPPIO_DB"]
    ctx = tls()
    c = Client(base_url=url, verify_ssl=ctx) if ctx else Client(base_url=url)
    raw = httpx.Client(base_url=url, verify=ctx) if ctx else httpx.Client(base_url=url)

    r = put_database.sync_detailed(db, client=c, body=DatabaseDef(partitions=4, replicas=1))
    check("create the database", r.status_code, 201)
    r = put_table.sync_detailed(db, "one", client=c, body={
        "key": [{"name": "id", "type": "string"}],
        "schema": {"type": "record", "name": "One", "fields": [{"name": "v", "type": "string"}]},
    })
    check("create the one-part table", r.status_code, 201)
    r = put_table.sync_detailed(db, "two", client=c, body={
        "key": [{"name": "box", "type": "string"}, {"name": "msg", "type": "long"}],
        "schema": {"type": "record", "name": "Two", "fields": [
            {"name": "subject", "type": "string"},
            {"name": "from", "type": "string", "index": "attribute"},
        ]},
    })
    check("create the two-part table", r.status_code, 201)

    # One key part holding a slash: the generator's %2F is the server's.
    r = put_document_1.sync_detailed(db, "one", "a/b", client=c, body=Document.from_dict({"v": "slash"}))
    check("put a one-part key with a slash", r.status_code, 201)
    r = read_documents_1.sync_detailed(db, "one", "a/b", client=c)
    check("get it back", (r.status_code, r.parsed.to_dict()), (200, {"v": "slash"}))
    check("the same document by hand, %2F", raw.get(f"/{db}/one/a%2Fb").json(), {"v": "slash"})
    check("a/b as two segments is two key parts", raw.get(f"/{db}/one/a/b").status_code, 400)

    for box, msg, subject, sender in [("m1", "7", "hi", "ann"), ("m1", "9", "yo", "bob"), ("m2", "1", "hey", "bob")]:
        r = put_document_2.sync_detailed(db, "two", box, msg, client=c,
                                         body=Document.from_dict({"subject": subject, "from": sender}))
        check(f"put {box}/{msg}", r.status_code, 201)
    r = read_documents_2.sync_detailed(db, "two", "m1", "9", client=c)
    check("get a two-part key", (r.status_code, r.parsed.to_dict()), (200, {"subject": "yo", "from": "bob"}))

    r = read_documents_1.sync_detailed(db, "two", "m1", client=c)
    check("a collection is a DocumentList", isinstance(r.parsed, DocumentList), True)
    got = [(d.key, d.document.to_dict()["subject"]) for d in r.parsed.documents]
    check("the collection under m1, in key order", got, [(["m1", 7], "hi"), (["m1", 9], "yo")])

    r = read_documents_1.sync_detailed(db, "two", "m1", client=c, query='from:"bob"')
    got = [(d.key, d.document.to_dict()["subject"]) for d in r.parsed.documents]
    check("an index query in m1", (r.status_code, got), (200, [(["m1", 9], "yo")]))

    r = delete_documents_2.sync_detailed(db, "two", "m1", "7", client=c)
    check("delete m1/7", r.status_code, 204)
    r = read_documents_2.sync_detailed(db, "two", "m1", "7", client=c)
    check("m1/7 is gone", r.status_code, 404)


if __name__ == "__main__":
    main()
