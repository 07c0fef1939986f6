"""Writes a bulk build test's Avro and Parquet inputs with fastavro and
pyarrow, from a JSON spec the Go test makes:

    {"avro": {"path": P, "schema": {...}, "rows": [...]},
     "parquet": {"path": P, "columns": [{"name": N, "type": T}], "rows": [...]}}

Rows are JSON objects; bytes and fixed values are given in base64.
"""

import base64
import json
import sys

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq


def avro_value(schema, v):
    if v is None:
        return None
    if isinstance(schema, list):
        for b in schema:
            if b != "null":
                return avro_value(b, v)
    t = schema["type"] if isinstance(schema, dict) else schema
    if isinstance(t, (dict, list)):
        return avro_value(t, v)
    if t in ("bytes", "fixed"):
        return base64.b64decode(v)
    if t == "record":
        return {f["name"]: avro_value(f["type"], v.get(f["name"])) for f in schema["fields"]}
    return v


LATLON = pa.struct([("lat", pa.float64()), ("lon", pa.float64())])

PARQUET_TYPES = {
    "string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "double": pa.float64(),
    "float": pa.float32(), "bool": pa.bool_(), "binary": pa.binary(), "date32": pa.date32(),
    "timestamp_ms": pa.timestamp("ms", tz="UTC"), "list_string": pa.list_(pa.string()),
    "map_string_int64": pa.map_(pa.string(), pa.int64()), "struct_latlon": LATLON,
}


def parquet_column(typ, values):
    if typ == "binary":
        values = [None if v is None else base64.b64decode(v) for v in values]
    if typ == "map_string_int64":
        values = [None if v is None else list(v.items()) for v in values]
    if typ == "timestamp_ms":
        return pa.array(values, type=pa.int64()).cast(PARQUET_TYPES[typ])
    if typ == "date32":
        return pa.array(values, type=pa.int32()).cast(pa.date32())
    return pa.array(values, type=PARQUET_TYPES[typ])


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    if "avro" in spec:
        a = spec["avro"]
        schema = fastavro.parse_schema(a["schema"])
        rows = [avro_value(a["schema"], r) for r in a["rows"]]
        with open(a["path"], "wb") as f:
            fastavro.writer(f, schema, rows, codec="deflate")
    if "parquet" in spec:
        p = spec["parquet"]
        cols = {c["name"]: parquet_column(c["type"], [r.get(c["name"]) for r in p["rows"]]) for c in p["columns"]}
        pq.write_table(pa.table(cols), p["path"], row_group_size=max(1, len(p["rows"]) // 3))


if __name__ == "__main__":
    main(sys.argv[1])
