"""Reads a Doppio export with third-party readers and prints its rows.

Usage: read_export.py READER EXPORT_DIR SCHEMAS_JSON

READER is pyarrow or duckdb (Parquet), fastavro (Avro) or json (JSON
Lines). SCHEMAS_JSON maps each table to its Avro record schema. Every row
is printed as one JSON object {"table": T, "row": {...}}, its values
rendered as Doppio's REST API renders documents (timestamps and dates as
numbers, bytes, fixed and decimals as base64, unions unwrapped), so the
test compares them with the database's documents as they are.
"""

import base64
import datetime
import decimal
import glob
import json
import os
import sys
import uuid

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
EPOCH_DAY = datetime.date(1970, 1, 1)


def b64(b):
    return base64.b64encode(bytes(b)).decode()


def decimal_bytes(v, scale):
    n = int(v.scaleb(scale).to_integral_value())
    bits = (n if n >= 0 else ~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def branch_name(s, names):
    if isinstance(s, str):
        return names[s].get("name", s) if s in names else s
    if isinstance(s, dict):
        if s["type"] in ("record", "enum", "fixed"):
            return s["name"]
        return s["type"]
    return "union"


class Normalizer:
    def __init__(self):
        self.names = {}

    def register(self, s):
        self.names[s["name"]] = s
        if "namespace" in s:
            self.names[s["namespace"] + "." + s["name"]] = s

    def walk(self, s):
        """Registers every named type s defines, so references resolve."""
        if isinstance(s, list):
            for b in s:
                self.walk(b)
        elif isinstance(s, dict):
            t = s["type"]
            if t in ("record", "enum", "fixed"):
                self.register(s)
            if t == "record":
                for f in s["fields"]:
                    self.walk(f["type"])
            elif t == "array":
                self.walk(s["items"])
            elif t == "map":
                self.walk(s["values"])
            elif isinstance(t, (dict, list)):
                self.walk(t)

    def norm(self, s, v):
        if v is None:
            return None  # a null, or a change export's deleted document
        if isinstance(s, str) and s in self.names:
            s = self.names[s]
        if isinstance(s, list):
            branches = [b for b in s if b != "null"]
            if len(branches) == 1:
                return self.norm(branches[0], v)
            by_name = {branch_name(b, self.names): b for b in branches}
            if isinstance(v, dict) and set(v) <= set(by_name):
                set_ = [(k, x) for k, x in v.items() if x is not None]
                if not set_:
                    return None
                return self.norm(by_name[set_[0][0]], set_[0][1])
            for b in branches:
                t = b if isinstance(b, str) else b["type"]
                if (t in ("int", "long") and isinstance(v, int) and not isinstance(v, bool)) or (
                    t == "string" and isinstance(v, str)
                ):
                    return self.norm(b, v)
            raise ValueError("no branch of %r takes %r" % (s, v))
        if isinstance(s, str):
            s = {"type": s}
        t = s["type"]
        if isinstance(t, (dict, list)):
            return self.norm(t, v)
        if isinstance(t, str) and t in self.names:
            return self.norm(self.names[t], v)
        lt = s.get("logicalType")
        if t == "record":
            self.register(s)
            return {f["name"]: self.norm(f["type"], v.get(f["name"])) for f in s["fields"]}
        if t == "enum":
            self.register(s)
            return v.decode() if isinstance(v, bytes) else v
        if t == "fixed":
            self.register(s)
            return b64(v)
        if t == "array":
            return [self.norm(s["items"], x) for x in v]
        if t == "map":
            if isinstance(v, list):
                v = dict(v)
            return {k: self.norm(s["values"], x) for k, x in v.items()}
        if t == "bytes" and lt == "decimal":
            return b64(decimal_bytes(v, s.get("scale", 0)))
        if t == "bytes":
            return b64(v)
        if t == "int" and lt == "date":
            return (v - EPOCH_DAY).days
        if t == "long" and lt == "timestamp-millis":
            return (v - EPOCH) // datetime.timedelta(milliseconds=1)
        if t == "long" and lt == "timestamp-micros":
            return (v - EPOCH) // datetime.timedelta(microseconds=1)
        if isinstance(v, uuid.UUID):
            return str(v)
        if isinstance(v, decimal.Decimal):
            raise ValueError("unexpected decimal for %r" % s)
        return v


def columns(schema):
    """The row's columns besides the key parts: change columns, fields."""
    cols = {"_op": "string", "_scn": "string", "_mtime": {"type": "long", "logicalType": "timestamp-millis"}}
    for f in schema["fields"]:
        cols[f["name"]] = f["type"]
    return cols


def rows_of(reader, path):
    if reader == "pyarrow":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if reader == "duckdb":
        import duckdb

        rel = duckdb.read_parquet(path)
        names = rel.columns
        return [dict(zip(names, r)) for r in rel.fetchall()]
    if reader == "fastavro":
        import fastavro

        with open(path, "rb") as f:
            return list(fastavro.reader(f))
    if reader == "json":
        with open(path) as f:
            return [json.loads(line) for line in f]
    raise SystemExit("unknown reader " + reader)


EXT = {"pyarrow": "parquet", "duckdb": "parquet", "fastavro": "avro", "json": "jsonl"}


def main():
    reader, root, schemas_path = sys.argv[1:4]
    with open(schemas_path) as f:
        schemas = json.load(f)
    out = sys.stdout
    for table, schema in sorted(schemas.items()):
        n = Normalizer()
        n.walk(schema)
        cols = columns(schema)
        for path in sorted(glob.glob(os.path.join(root, table, "p-*." + EXT[reader]))):
            for row in rows_of(reader, path):
                if reader != "json":
                    row = {k: (n.norm(cols[k], v) if k in cols else v) for k, v in row.items()}
                out.write(json.dumps({"table": table, "file": os.path.relpath(path, root), "row": row}) + "\n")


if __name__ == "__main__":
    main()
