"""The Doppio client: documents, collections, queries, transactions,
schemas, the cluster view and the change stream over Doppio's REST API."""

from __future__ import annotations

import json
import ssl
import threading
import time
import uuid
from email.utils import format_datetime, parsedate_to_datetime
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence
from urllib.parse import quote, urlencode

import httpx

from .changes import ChangeStream
from .errors import DoppioError, NotModified, error_from_problem
from .keys import Key, KeyPart, document_path, escape_part, partition_of
from .models import (
    BatchResult,
    Document,
    IndexStatus,
    OpResult,
    Page,
    Session,
    TxnResult,
    WriteResult,
)

DEFAULT_RETRY = 10.0
"""Seconds within which a request is retried by default (see ``retry``)."""

_RETRYABLE_CONNECT = (httpx.ConnectError,)


class _Routes:
    """The client's copy of the cluster's routing table: per database, the
    base URL of each partition's leader ("" when unknown)."""

    def __init__(self, refresh: float) -> None:
        self.refresh = refresh
        self.lock = threading.Lock()
        self.fetched = 0.0
        self.stale = True
        self.dbs: dict[str, list[str]] = {}


class Client:
    """A client of a Doppio server, or of a cluster through one of its nodes.

    ``url`` is a node's (or a load balancer's) base URL, ``http://host:port``
    or ``https://host:port``. Authentication: ``token`` (from
    :meth:`login`), ``basic_auth=(user, password)``, or a client
    certificate ``cert=(certfile, keyfile)``; ``ca`` is the CA file a secure
    cluster's certificates are checked against.

    ``retry`` is the number of seconds within which a request answered 503
    or 429, or whose connection was refused, is sent again (0: never); a 503
    or 429 waits for its ``Retry-After``. Inserts, transactions and batches
    carry an ``Idempotency-Key`` (``idempotency_key``, or one the client
    makes), so they are also sent again after a broken exchange, a 504 or
    a 409 saying the first attempt is in flight: the server answers the
    first outcome rather than applying twice. Any other write answered 504
    raises :class:`doppio.OutcomeUnknown` unretried.

    ``smart_routing`` (seconds between refreshes of the routing table, or
    None) sends each request naming a partition key straight to its
    partition's leader, from the cluster view (``GET /_cluster``); a leader
    that fails a request sends that request through ``url`` instead, which
    forwards it, and refreshes the table.

    A client is safe to share between threads; close it (or use it as a
    context manager) to release its connections.
    """

    def __init__(
        self,
        url: str,
        *,
        token: Optional[str] = None,
        basic_auth: Optional[tuple[str, str]] = None,
        cert: Optional[tuple[str, str]] = None,
        ca: Optional[str] = None,
        timeout: float = 30.0,
        retry: float = DEFAULT_RETRY,
        smart_routing: Optional[float] = None,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        self.base = url.rstrip("/")
        self.retry = retry
        self._routes = _Routes(smart_routing) if smart_routing is not None else None
        verify: ssl.SSLContext | bool = True
        if ca is not None or cert is not None:
            verify = ssl.create_default_context(cafile=ca)
            if cert is not None:
                verify.load_cert_chain(cert[0], cert[1])
        self._http = httpx.Client(timeout=timeout, verify=verify, transport=transport)
        self._auth = ""
        if token is not None:
            self._auth = "Bearer " + token
        elif basic_auth is not None:
            self._http.auth = httpx.BasicAuth(*basic_auth)

    def close(self) -> None:
        """Close the client's connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The request loop.

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, str]] = None,
        headers: Optional[Mapping[str, str]] = None,
        body: Any = None,
        route: Optional[tuple[str, KeyPart]] = None,
        ok_statuses: tuple[int, ...] = (),
    ) -> httpx.Response:
        """Send one call, retrying as configured; raise the answer's problem
        unless its status is below 400 or in ``ok_statuses``."""
        hdrs = {"Accept": "application/json"}
        if self._auth:
            hdrs["Authorization"] = self._auth
        if headers:
            hdrs.update(headers)
        content = None
        if body is not None:
            content = json.dumps(body, separators=(",", ":")).encode()
            hdrs["Content-Type"] = "application/json"
        query = ("?" + urlencode(params, safe=",")) if params else ""
        start = time.monotonic()
        backoff = 0.05
        unrouted = route is None or self._routes is None
        while True:
            base = self.base if unrouted else self.route_for(route[0], route[1])  # type: ignore[index]
            resp: Optional[httpx.Response] = None
            err: Optional[httpx.HTTPError] = None
            try:
                resp = self._http.request(method, base + path + query, headers=hdrs, content=content)
            except httpx.HTTPError as e:
                err = e
            elapsed = time.monotonic() - start
            # A read may always be sent again; a write only after a failure
            # that proves it was not applied (a refused connection, a 503).
            if not unrouted and base != self.base and (
                (err is not None and (method == "GET" or isinstance(err, _RETRYABLE_CONNECT)))
                or (resp is not None and resp.status_code == 503)
            ):
                unrouted = True
                self._missed()
                if elapsed < self.retry:
                    continue
            wait: Optional[float] = None
            if resp is not None and resp.status_code in (503, 429):
                wait = backoff
                ra = _retry_after(resp)
                if ra is not None and (ra > 0 or resp.status_code == 503):
                    wait = ra
                if resp.status_code == 429 and wait > self.retry - elapsed:
                    wait = None  # nothing waits that long: answer it now
            elif isinstance(err, _RETRYABLE_CONNECT):
                wait = backoff
            elif IDEMPOTENCY_KEY in hdrs and method != "GET" and (
                isinstance(err, httpx.TransportError) or (resp is not None and _resendable(resp))
            ):
                # The server answers the first outcome again, or says when
                # it is decided.
                wait = backoff
                if resp is not None and (ra := _retry_after(resp)):
                    wait = ra
            remaining = self.retry - elapsed
            if wait is None or remaining <= 0:
                if err is not None:
                    raise err
                assert resp is not None
                if resp.status_code >= 400 and resp.status_code not in ok_statuses:
                    raise _problem(resp)
                return resp
            time.sleep(min(wait, remaining))
            backoff = min(backoff * 2, 1.0)

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        return self._request(method, path, **kw).json()

    # Smart routing.

    def route_for(self, db: str, partition_key: KeyPart) -> str:
        """Return the base URL a request for ``partition_key``'s document
        group in ``db`` goes to: its partition's leader under smart routing
        when the routing table knows it, else the client's ``url``."""
        r = self._routes
        if r is None:
            return self.base
        with r.lock:
            if r.stale or time.monotonic() - r.fetched > r.refresh:
                try:
                    r.dbs = self._fetch_routes()
                    r.stale = False
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                r.fetched = time.monotonic()  # a failed fetch is not retried on every request
            leaders = r.dbs.get(db)
        if not leaders:
            return self.base
        try:
            return leaders[partition_of(partition_key, len(leaders))] or self.base
        except (TypeError, ValueError):
            return self.base

    def _missed(self) -> None:
        if self._routes is not None:
            with self._routes.lock:
                self._routes.stale = True

    def _fetch_routes(self) -> dict[str, list[str]]:
        hdrs = {"Authorization": self._auth} if self._auth else {}
        resp = self._http.get(self.base + "/_cluster", headers=hdrs)
        resp.raise_for_status()
        view = resp.json()
        scheme = "https://" if self.base.startswith("https://") else "http://"
        addr = {n["id"]: scheme + n["http"] for n in view.get("nodes") or [] if n.get("state") == "alive" and n.get("http")}
        dbs: dict[str, list[str]] = {}
        for p in view.get("partitions") or []:
            ls = dbs.setdefault(p["database"], [])
            while len(ls) <= p["partition"]:
                ls.append("")
            ls[p["partition"]] = addr.get(p.get("leader") or "", "")
        return dbs

    # Authentication.

    def login(self, user: str, password: str) -> Session:
        """Exchange ``user``'s password for a session token, which this
        client then sends as its Bearer credential."""
        s = self._json("POST", "/_auth/login", body={"user": user, "password": password})
        self._auth = "Bearer " + s["token"]
        self._http.auth = None
        return Session(token=s["token"], expires=s.get("expires", ""))

    # Documents.

    def get(
        self,
        db: str,
        table: str,
        key: Key,
        *,
        fields: Optional[Sequence[str]] = None,
        if_none_match: Optional[str] = None,
        staleness: Optional[str] = None,
    ) -> Document:
        """Read one document. ``fields`` projects it; ``if_none_match``
        (an ETag) raises :class:`doppio.NotModified` when it still holds;
        ``staleness`` (e.g. ``"2s"``) allows an answer that old, from a
        follower or a cache. Raises :class:`doppio.NotFound` when absent."""
        headers = {}
        if if_none_match:
            headers["If-None-Match"] = if_none_match
        if staleness:
            headers["X-Doppio-Staleness"] = staleness
        resp = self._request(
            "GET", document_path(db, table, key), params=_fields(fields), headers=headers,
            route=(db, key[0]), ok_statuses=(304,),
        )
        if resp.status_code == 304:
            raise NotModified(if_none_match or "")
        lm = resp.headers.get("Last-Modified")
        return Document(
            key=list(key),
            body=resp.json(),
            etag=resp.headers.get("ETag", ""),
            last_modified=parsedate_to_datetime(lm) if lm else None,
            schema_version=int(resp.headers.get("X-Doppio-Schema-Version") or 0),
            scn=resp.headers.get("X-Doppio-SCN", ""),
        )

    def list(
        self,
        db: str,
        table: str,
        prefix: Key = (),
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        fields: Optional[Sequence[str]] = None,
        query: Optional[str] = None,
        sort: Optional[str] = None,
    ) -> Page:
        """Read one page of the collection under ``prefix`` (the leading
        key parts), or of a query (``query``, ``sort`` such as
        ``"-size"``) within it or, with no prefix, over the whole table."""
        params = _fields(fields)
        for k, v in (("limit", limit), ("cursor", cursor), ("query", query), ("sort", sort)):
            if v:
                params[k] = str(v)
        if prefix:
            path, route = document_path(db, table, prefix), (db, prefix[0])
        elif query or sort:
            path, route = "/" + quote(db, safe="") + "/" + quote(table, safe=""), None
        else:
            raise ValueError("doppio: listing needs a key prefix, or a query over the whole table")
        return _page(self._json("GET", path, params=params, route=route))

    def iter(
        self,
        db: str,
        table: str,
        prefix: Key = (),
        *,
        page_size: Optional[int] = None,
        fields: Optional[Sequence[str]] = None,
        query: Optional[str] = None,
        sort: Optional[str] = None,
    ) -> Iterator[Document]:
        """Iterate over every document of a collection or query, fetching
        pages of ``page_size`` as it goes by following their cursors."""
        cursor: Optional[str] = None
        while True:
            page = self.list(db, table, prefix, limit=page_size, cursor=cursor, fields=fields, query=query, sort=sort)
            yield from page.documents
            if not page.next:
                return
            cursor = page.next

    def query(
        self,
        db: str,
        table: str,
        query: str,
        prefix: Key = (),
        *,
        sort: Optional[str] = None,
        page_size: Optional[int] = None,
        fields: Optional[Sequence[str]] = None,
    ) -> Iterator[Document]:
        """Iterate over the documents matching ``query`` (the index query
        language, e.g. ``"folder:inbox AND size:[0 TO 100]"``) in one
        document group (``prefix``) or over the whole table."""
        return self.iter(db, table, prefix, page_size=page_size, fields=fields, query=query, sort=sort)

    def count(self, db: str, table: str, query: str, prefix: Key = ()) -> int:
        """Return how many documents match ``query``."""
        if prefix:
            path, route = document_path(db, table, prefix), (db, prefix[0])
        else:
            path, route = "/" + quote(db, safe="") + "/" + quote(table, safe=""), None
        return int(self._json("GET", path, params={"query": query, "count": "true"}, route=route)["count"])

    def multi_get(
        self,
        db: str,
        table: str,
        leading: Key,
        last_parts: Iterable[KeyPart],
        *,
        fields: Optional[Sequence[str]] = None,
    ) -> list[Document]:
        """Read the documents under ``leading`` whose last key part is one
        of ``last_parts``, in one request; absent ones are left out."""
        items = ",".join(escape_part(p) for p in last_parts)
        path = document_path(db, table, leading) + "/(" + items + ")"
        return _page(self._json("GET", path, params=_fields(fields), route=(db, leading[0]))).documents

    def put(
        self,
        db: str,
        table: str,
        key: Key,
        document: Any,
        *,
        if_match: Optional[str] = None,
        if_none_match: Optional[str] = None,
        if_unmodified_since: Optional[datetime] = None,
    ) -> WriteResult:
        """Create or replace a document. ``if_match`` (an ETag) or
        ``if_none_match="*"`` (create only) make it conditional: raises
        :class:`doppio.PreconditionFailed` when the condition is false."""
        return self._write("PUT", db, table, key, document, _conditions(if_match, if_none_match, if_unmodified_since))

    def patch(
        self,
        db: str,
        table: str,
        key: Key,
        *,
        set: Optional[Mapping[str, Any]] = None,
        unset: Optional[Sequence[str]] = None,
        inc: Optional[Mapping[str, Any]] = None,
        if_match: Optional[str] = None,
        if_unmodified_since: Optional[datetime] = None,
    ) -> WriteResult:
        """Update part of a document: ``set`` fields, ``unset`` them,
        ``inc`` counters; dotted paths reach nested records."""
        return self._write("PATCH", db, table, key, _patch(set, unset, inc), _conditions(if_match, None, if_unmodified_since))

    def insert(self, db: str, table: str, leading: Key, document: Any, *, idempotency_key: Optional[str] = None) -> WriteResult:
        """Insert a document under ``leading``, the server choosing its
        auto-increment last key part (in the result's ``key``). Sent under
        ``idempotency_key`` (or a key of the client's own): a call again
        with the same key answers the first outcome."""
        return self._write("POST", db, table, leading, document, _idempotent(idempotency_key))

    def _write(self, method: str, db: str, table: str, key: Key, body: Any, headers: dict[str, str]) -> WriteResult:
        resp = self._request(method, document_path(db, table, key), headers=headers, body=body, route=(db, key[0]))
        w = resp.json()
        return WriteResult(
            key=w.get("key") or list(key), etag=w.get("etag", ""), scn=w.get("scn", ""),
            version=w.get("version", 0), created=resp.status_code == 201,
        )

    def delete(
        self,
        db: str,
        table: str,
        key: Key,
        *,
        if_match: Optional[str] = None,
        if_unmodified_since: Optional[datetime] = None,
    ) -> None:
        """Delete one document; raises :class:`doppio.NotFound` if absent."""
        self._request("DELETE", document_path(db, table, key), headers=_conditions(if_match, None, if_unmodified_since), route=(db, key[0]))

    def delete_collection(self, db: str, table: str, leading: Key) -> int:
        """Delete every document under ``leading`` atomically; return how many."""
        resp = self._request("DELETE", document_path(db, table, leading), route=(db, leading[0]))
        return int(resp.headers.get("X-Doppio-Deleted") or 0)

    # Transactions and batches.

    def txn(
        self, db: str, ops: Sequence[Mapping[str, Any]], *, partition_key: Optional[KeyPart] = None, idempotency_key: Optional[str] = None
    ) -> TxnResult:
        """Apply ``ops`` (from :func:`put_op`, :func:`insert_op`,
        :func:`patch_op`, :func:`delete_op`), across tables of one document
        group, all at one SCN or none. A false condition raises
        :class:`doppio.PreconditionFailed` whose ``operation`` names it.
        Sent under ``idempotency_key`` (or a key of the client's own)."""
        body: dict[str, Any] = {"ops": list(ops)}
        if partition_key is not None:
            body["partitionKey"] = partition_key
        pk = partition_key if partition_key is not None else (ops[0]["key"][0] if ops and ops[0].get("key") else None)
        out = self._json(
            "POST", "/" + quote(db, safe="") + "/_txn", body=body, route=(db, pk) if pk is not None else None, headers=_idempotent(idempotency_key)
        )
        return TxnResult(scn=out.get("scn", ""), results=[_op_result(r) for r in out.get("results") or []])

    def batch(self, db: str, ops: Sequence[Mapping[str, Any]], *, idempotency_key: Optional[str] = None) -> list[BatchResult]:
        """Apply ``ops`` each on its own (any document groups); one result
        per operation, failures included rather than raised. Sent under
        ``idempotency_key`` (or a key of the client's own): each
        operation's outcome is remembered on its own."""
        out = self._json("POST", "/" + quote(db, safe="") + "/_batch", body={"ops": list(ops)}, headers=_idempotent(idempotency_key))
        results = []
        for r in out.get("results") or []:
            p = r.get("problem")
            results.append(BatchResult(
                status=r.get("status", 0), scn=r.get("scn", ""),
                result=_op_result(r["result"]) if r.get("result") else None,
                error=error_from_problem(p.get("status") or r.get("status", 0), p) if p else None,
            ))
        return results

    # Schemas.

    def put_database(self, name: str, *, partitions: int, replicas: int = 1, partitioner: str = "hash") -> tuple[dict[str, Any], bool]:
        """Create a database (second value True) or update what may change."""
        resp = self._request("PUT", "/_schemas/" + quote(name, safe=""), body={"partitions": partitions, "replicas": replicas, "partitioner": partitioner})
        return resp.json(), resp.status_code == 201

    def get_database(self, name: str) -> dict[str, Any]:
        """Return a database's schema and its tables."""
        return self._json("GET", "/_schemas/" + quote(name, safe=""))  # type: ignore[no-any-return]

    def put_table(self, db: str, table: str, *, key: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create a table, or register its next document-schema version
        (raises :class:`doppio.Conflict` saying why when incompatible).
        ``key`` lists its parts, e.g. ``[{"name": "id", "type": "string"}]``;
        ``schema`` is an Avro record whose fields may carry ``"index"``."""
        resp = self._request("PUT", "/_schemas/" + quote(db, safe="") + "/" + quote(table, safe=""), body={"key": list(key), "schema": schema})
        return resp.json(), resp.status_code == 201

    def get_table(self, db: str, table: str) -> dict[str, Any]:
        """Return a table's current schema, its versions and its indexes."""
        return self._json("GET", "/_schemas/" + quote(db, safe="") + "/" + quote(table, safe=""))  # type: ignore[no-any-return]

    def get_table_version(self, db: str, table: str, version: int) -> dict[str, Any]:
        """Return one registered document-schema version of a table."""
        return self._json("GET", f"/_schemas/{quote(db, safe='')}/{quote(table, safe='')}/versions/{version}")  # type: ignore[no-any-return]

    def index_status(self, db: str, table: str) -> list[IndexStatus]:
        """Return the build state of each index of a table."""
        return [
            IndexStatus(field=i["field"], kind=i["kind"], state=i["state"], progress=i.get("progress", 0.0), done=i.get("done", 0), total=i.get("total", 0))
            for i in self.get_table(db, table).get("indexes") or []
        ]

    # Cluster, quotas.

    def cluster(self) -> dict[str, Any]:
        """Return the cluster view: nodes, and per partition its replicas,
        leader and SCN."""
        return self._json("GET", "/_cluster")  # type: ignore[no-any-return]

    def set_quota(self, scope: str, name: str, *, read_units: float = 0, write_units: float = 0) -> dict[str, Any]:
        """Set the quota of a database (``scope="databases"``) or user
        (``"users"``) in read and write units per second; 0 is unlimited."""
        return self._json("PUT", f"/_quotas/{scope}/{quote(name, safe='')}", body={"readUnitsPerSecond": read_units, "writeUnitsPerSecond": write_units})  # type: ignore[no-any-return]

    def delete_quota(self, scope: str, name: str) -> None:
        """Remove the quota of a database or user."""
        self._request("DELETE", f"/_quotas/{scope}/{quote(name, safe='')}")

    # Change stream.

    def changes(
        self,
        db: str,
        *,
        tables: Optional[Sequence[str]] = None,
        partitions: Optional[Sequence[int]] = None,
        checkpoint: Optional[str] = None,
        bootstrap: bool = False,
        read_timeout: Optional[float] = None,
    ) -> ChangeStream:
        """Open the change stream of ``db``: its events in commit order per
        partition, from ``checkpoint`` (exactly after the last event read
        before it), else from a snapshot of the tables (``bootstrap``), else
        from the newest commit. Raises
        :class:`doppio.CheckpointExpired` when the checkpoint is no longer
        retained. The stream does not end by itself: close it, or give
        ``read_timeout``, the seconds after which a wait for the next line
        raises ``httpx.ReadTimeout``."""
        params: dict[str, str] = {}
        if tables:
            params["tables"] = ",".join(tables)
        if partitions:
            params["partitions"] = ",".join(str(p) for p in partitions)
        if checkpoint:
            params["from"] = checkpoint
        if bootstrap:
            params["bootstrap"] = "true"
        hdrs = {"Accept": "application/x-ndjson"}
        if self._auth:
            hdrs["Authorization"] = self._auth
        req = self._http.build_request(
            "GET", self.base + "/_changes/" + quote(db, safe="") + ("?" + urlencode(params, safe=",") if params else ""),
            headers=hdrs, timeout=httpx.Timeout(self._http.timeout.connect, read=read_timeout),
        )
        resp = self._http.send(req, stream=True)
        if resp.status_code != 200:
            try:
                resp.read()
            finally:
                resp.close()
            raise _problem(resp)
        return ChangeStream(resp, checkpoint or "")


# Operations of transactions and batches.


def put_op(table: str, key: Key, document: Any, *, if_match: Optional[str] = None, if_none_match: Optional[str] = None) -> dict[str, Any]:
    """A put of a transaction or batch."""
    op: dict[str, Any] = {"op": "put", "table": table, "key": list(key), "document": document}
    if if_match:
        op["ifMatch"] = if_match
    if if_none_match:
        op["ifNoneMatch"] = if_none_match
    return op


def insert_op(table: str, leading: Key, document: Any) -> dict[str, Any]:
    """An insert with an auto-increment last key part."""
    return {"op": "insert", "table": table, "key": list(leading), "document": document}


def patch_op(
    table: str, key: Key, *, set: Optional[Mapping[str, Any]] = None, unset: Optional[Sequence[str]] = None,
    inc: Optional[Mapping[str, Any]] = None, if_match: Optional[str] = None,
) -> dict[str, Any]:
    """A patch of a transaction or batch."""
    op: dict[str, Any] = {"op": "patch", "table": table, "key": list(key), "patch": _patch(set, unset, inc)}
    if if_match:
        op["ifMatch"] = if_match
    return op


def delete_op(table: str, key: Key, *, if_match: Optional[str] = None) -> dict[str, Any]:
    """A delete of a transaction or batch."""
    op: dict[str, Any] = {"op": "delete", "table": table, "key": list(key)}
    if if_match:
        op["ifMatch"] = if_match
    return op


# Helpers.


def _patch(set: Optional[Mapping[str, Any]], unset: Optional[Sequence[str]], inc: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    p: dict[str, Any] = {}
    if set:
        p["$set"] = dict(set)
    if unset:
        p["$unset"] = list(unset)
    if inc:
        p["$inc"] = dict(inc)
    if not p:
        raise ValueError("doppio: a patch needs set, unset or inc")
    return p


def _conditions(if_match: Optional[str], if_none_match: Optional[str], if_unmodified_since: Optional[datetime]) -> dict[str, str]:
    h = {}
    if if_match:
        h["If-Match"] = if_match
    if if_none_match:
        h["If-None-Match"] = if_none_match
    if if_unmodified_since:
        h["If-Unmodified-Since"] = format_datetime(if_unmodified_since.astimezone(timezone.utc), usegmt=True)
    return h


def _fields(fields: Optional[Sequence[str]]) -> dict[str, str]:
    return {"fields": ",".join(fields)} if fields else {}


def _page(body: Mapping[str, Any]) -> Page:
    return Page(
        documents=[Document(key=d["key"], body=d.get("document")) for d in body.get("documents") or []],
        next=body.get("next") or "",
    )


def _op_result(r: Mapping[str, Any]) -> OpResult:
    return OpResult(key=r.get("key") or [], etag=r.get("etag", ""), created=r.get("created", False), deleted=r.get("deleted", 0))


IDEMPOTENCY_KEY = "Idempotency-Key"
"""The header a write's outcome is remembered under by the server."""


def _idempotent(key: Optional[str]) -> dict[str, str]:
    """The header of a write sent under ``key``, or a fresh random key."""
    return {IDEMPOTENCY_KEY: key if key is not None else uuid.uuid4().hex}


def _resendable(resp: httpx.Response) -> bool:
    """Whether an idempotent write's answer leaves its outcome to a retry:
    outcome unknown, or its key still in flight."""
    if resp.status_code == 504:
        return True
    if resp.status_code != 409:
        return False
    try:
        return str(resp.json().get("type", "")).endswith("/idempotency-key-in-use")
    except ValueError:
        return False


def _retry_after(resp: httpx.Response) -> Optional[float]:
    try:
        v = float(resp.headers.get("Retry-After", ""))
    except ValueError:
        return None
    return v if v >= 0 else None


def _problem(resp: httpx.Response) -> DoppioError:
    problem: Optional[dict[str, Any]] = None
    try:
        body = resp.json()
        if isinstance(body, dict):
            problem = body
    except ValueError:
        text = resp.text.strip()
        problem = {"detail": text[:512]} if text else None
    return error_from_problem(resp.status_code, problem, _retry_after(resp))
