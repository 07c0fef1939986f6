"""Build a Doppio bulk load with Spark: the same directory as `doppio bulk
build` (docs/design/bulk.md), for inputs that outgrow one machine.

    spark-submit spark/doppio_build.py --db MailboxDB --table Message \\
        --schema-file examples/mailbox/Message.json --schema-version 1 \\
        --partitions 8 --input messages.jsonl --out /shared/build

(or `python -m doppio_build …` with spark/ on PYTHONPATH and pyspark
installed). Every record is read, split into key and document, validated
and encoded in Spark tasks; one shuffle brings each partition's records
together sorted by key, where equal neighbours are the duplicate keys
(every copy refused) and each task writes its partition's file. Rejects
are written by the tasks that find them, into part files the driver
joins into rejects.jsonl; the driver writes manifest.json last, so a
directory without a manifest is an unfinished build.

--out must be a directory every executor can write (local mode, or a
shared filesystem). Formats: JSON Lines and CSV through Spark's text and
CSV sources, Parquet through Spark's, Avro object container files read by
fastavro inside the tasks (one task per file), logical types as their
underlying numbers.
"""

import argparse
import base64
import csv
import hashlib
import io
import re
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import doppio_codec as codec  # noqa: E402

BUILDER = "doppio-spark 0.1.0"

# Prefix of the tasks' rejects parts, joined into rejects.jsonl and removed.
REJECTS_PART = ".rejects-"

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".avro": "avro", ".parquet": "parquet"}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="doppio_build", description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True, help="the database the build is for")
    p.add_argument("--table", required=True, help="the table the build is for")
    p.add_argument("--schema-file", required=True, help="the table definition, as PUT /_schemas/{db}/{table} takes it")
    p.add_argument("--schema-version", type=int, required=True, help="the schema version the file holds")
    p.add_argument("--partitions", type=int, required=True, help="the database's partition count")
    p.add_argument("--input", nargs="+", required=True, action="extend", help="input files, in order")
    p.add_argument("--format", choices=sorted(set(FORMATS.values())), help="the inputs' format (default: from each extension)")
    p.add_argument("--out", required=True, help="the build directory (created; must be empty)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    p.add_argument("--max-document-bytes", type=int, default=1 << 20,
                   help="reject documents whose encoding is larger (the server's limit)")
    a = p.parse_args(argv)
    if not 1 <= a.partitions <= 4096:
        p.error("--partitions must be 1 to 4096, not %d" % a.partitions)
    if a.schema_version < 1:
        p.error("--schema-version must be 1 or more, not %d" % a.schema_version)
    a.formats = []
    for path in a.input:
        fmt = a.format or FORMATS.get(os.path.splitext(path)[1].lower())
        if fmt is None:
            p.error("input %s: unknown format (extension not one of %s); give --format" % (path, ", ".join(sorted(FORMATS))))
        if not os.path.isfile(path):
            p.error("input %s: not a readable file" % path)
        a.formats.append(fmt)
    return a


def file_digest(item):
    """(input index, base name, size, content SHA-256) of one input."""
    i, path = item
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return i, os.path.basename(path), size, h.hexdigest()


def fingerprint(digests):
    """The build's input fingerprint: SHA-256 over each input's base name,
    size and content digest, in the order given."""
    h = hashlib.sha256()
    for _, name, size, sha in sorted(digests):
        h.update(("%s\n%d\n%s\n" % (name, size, sha)).encode("utf-8"))
    return "sha256:" + h.hexdigest()


# --- reading: each input becomes records (input index, ordinal, kind,
# payload), kind "json" (a line), "csv" (cells) or "values" (a dict) ---


def read_jsonl(sc, i, path):
    def records(pair):
        line, n = pair
        return [(i, n + 1, "json", line.strip())] if line.strip() else []

    return sc.textFile(path).zipWithIndex().flatMap(records)


def read_csv(spark, i, path, name, keys):
    header = next(csv.reader([spark.sparkContext.textFile(path).first()]), [])
    if header:
        header[0] = header[0].lstrip("\ufeff")
    for h in header:
        if header.count(h) > 1:
            raise codec.MalformedInput("%s: header: column %s appears twice" % (name, codec.go_quote(h)))
    for k in keys:
        if k not in header:
            raise codec.MalformedInput("%s: header lacks key part %s" % (name, codec.go_quote(k)))
    df = (spark.read.option("header", True).option("multiLine", True).option("escape", '"')
          .option("mode", "FAILFAST").option("inferSchema", False).csv(path))

    def records(pair):
        row, n = pair
        return (i, n + 1, "csv", list(row))

    return df.rdd.zipWithIndex().map(records), header


def read_parquet(spark, table, i, path):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.read.parquet(path)
    logical = {f.name: f.typ.logical or (f.typ.nullable.logical if f.typ.nullable else "") for f in table.root.fields}
    cols = []
    for f in df.schema.fields:
        c = F.col("`%s`" % f.name)
        if isinstance(f.dataType, T.TimestampType):
            c = (F.unix_micros(c) if logical.get(f.name) == "timestamp-micros" else F.unix_millis(c)).alias(f.name)
        elif isinstance(f.dataType, T.DateType):
            c = F.unix_date(c).alias(f.name)
        cols.append(c)
    df = df.select(*cols)

    def records(pair):
        row, n = pair
        return (i, n + 1, "values", plain(row.asDict(recursive=True)))

    return df.rdd.zipWithIndex().map(records)


def plain(v):
    """A Spark or fastavro value as the JSON-like value validation takes."""
    if isinstance(v, dict):
        return {k: plain(e) for k, e in v.items()}
    if isinstance(v, list):
        return [plain(e) for e in v]
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def read_avro(sc, i, path, name):
    def records(pair):
        import fastavro
        import fastavro.read

        _, content = pair
        # Doppio stores a logical type's underlying number: read that, as
        # the Go builder does, rather than fastavro's datetime and date.
        # A decimal stays a Decimal, which is refused (check_native).
        readers = fastavro.read.LOGICAL_READERS
        saved = dict(readers)
        for k in list(readers):
            if not k.endswith("-decimal"):
                del readers[k]
        try:
            for n, rec in enumerate(fastavro.reader(io.BytesIO(content)), 1):
                yield i, n, "values", plain(rec)
        except (ValueError, EOFError, StopIteration) as e:
            raise codec.MalformedInput("%s: not a readable Avro object container file: %s" % (name, e))
        finally:
            readers.update(saved)

    return sc.binaryFiles(path, 1).flatMap(records)


# --- the build ---


def check_records(definition, partitions, max_doc, names, headers):
    """Per Spark partition: each record as ("ok", (partition, key), (doc,
    input, ordinal)) or ("rej", (input, ordinal), reason)."""

    def run(it):
        table = codec.Table(definition)
        for i, n, kind, payload in it:
            try:
                if kind == "json":
                    key, doc = table.from_values(codec.parse_json_line(payload, "%s:%d" % (names[i], n)))
                elif kind == "csv":
                    key, doc = table.from_cells(headers[i], payload)
                else:
                    key, doc = table.from_values(codec.check_native(payload))
                p, k, d = table.entry(key, doc, partitions, max_doc)
                yield "ok", (p, k), (d, i, n)
            except codec.Refused as e:
                yield "rej", (i, n), str(e)

    return run


def write_partitions(out):
    """Per shuffled partition (index = Doppio partition): its file, records
    in key order, every copy of a duplicate key refused into the task's
    rejects part; returns its manifest entry."""

    def run(index, it):
        name = codec.partition_file_name(index)
        with open(os.path.join(out, name), "wb") as f, RejectsPart(out, "dup", index) as rejects:
            w = codec.PartitionWriter(f)
            group = []
            for (_, key), val in it:
                if group and group[0][0] != key:
                    flush(w, group, rejects)
                    group = []
                group.append((key, val))
            flush(w, group, rejects)
            w.close()
        entry = {"partition": index, "path": name, "records": w.records, "bytes": w.bytes, "sha256": w.sha.hexdigest()}
        if w.first is not None:
            entry["firstKey"] = base64.b64encode(w.first).decode()
            entry["lastKey"] = base64.b64encode(w.last).decode()
        yield entry

    return run


def flush(w, group, rejects):
    if len(group) == 1:
        key, (doc, _, _) = group[0]
        w.add(key, doc)
    else:
        for _, (_, i, n) in group:
            rejects.add(i, n, "duplicate key")


class RejectsPart:
    """One task's share of rejects.jsonl, a part file the driver joins:
    rejects stay on the executors however many there are."""

    def __init__(self, out, stage, index):
        self.path = os.path.join(out, "%s%s-%05d" % (REJECTS_PART, stage, index))
        self.count = 0

    def __enter__(self):
        self.f = open(self.path, "w", encoding="utf-8")
        return self

    def add(self, i, n, reason):
        self.f.write(json.dumps({"input": i, "record": n, "reason": reason}, ensure_ascii=False) + "\n")
        self.count += 1

    def __exit__(self, *exc):
        self.f.close()


def write_rejects(out):
    def run(index, it):
        with RejectsPart(out, "check", index) as rejects:
            for r in it:
                if r[0] == "rej":
                    (i, n), reason = r[1], r[2]
                    rejects.add(i, n, reason)
        yield rejects.count

    return run


def join_rejects(out, names):
    """rejects.jsonl from the tasks' parts, input indexes turned into the
    inputs' names; returns the count."""
    parts = sorted(p for p in os.listdir(out) if p.startswith(REJECTS_PART))
    count = 0
    with open(os.path.join(out, "rejects.jsonl"), "w", encoding="utf-8") as f:
        for p in parts:
            with open(os.path.join(out, p), encoding="utf-8") as part:
                for line in part:
                    r = json.loads(line)
                    r["input"] = names[r["input"]]
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
                    count += 1
            os.remove(os.path.join(out, p))
    return count


def build(spark, a):
    with open(a.schema_file, encoding="utf-8") as f:
        definition = json.load(f)
    table = codec.Table(definition)
    sc = spark.sparkContext
    sc.addPyFile(codec.__file__)

    if os.path.isdir(a.out) and os.listdir(a.out):
        if not a.overwrite:
            raise SystemExit("doppio_build: %s is not empty (give --overwrite to replace it)" % a.out)
        for name in os.listdir(a.out):
            os.remove(os.path.join(a.out, name))
    os.makedirs(a.out, exist_ok=True)
    out = os.path.abspath(a.out)

    inputs = [os.path.abspath(p) for p in a.input]
    digests = sc.parallelize(list(enumerate(inputs)), len(inputs)).map(file_digest).collect()

    parts, headers = [], {}
    for i, (path, fmt) in enumerate(zip(inputs, a.formats)):
        if fmt == "jsonl":
            parts.append(read_jsonl(sc, i, path))
        elif fmt == "csv":
            rdd, headers[i] = read_csv(spark, i, path, a.input[i], [k for k, _ in table.key])
            parts.append(rdd)
        elif fmt == "parquet":
            parts.append(read_parquet(spark, table, i, path))
        else:
            parts.append(read_avro(sc, i, path, a.input[i]))
    records = sc.union(parts)

    from pyspark import StorageLevel

    check = check_records(definition, a.partitions, a.max_document_bytes, a.input, headers)
    checked = records.mapPartitions(check).persist(StorageLevel.MEMORY_AND_DISK)
    good = checked.filter(lambda r: r[0] == "ok").map(lambda r: (r[1], r[2]))
    checked.mapPartitionsWithIndex(write_rejects(out)).count()
    files = (good.repartitionAndSortWithinPartitions(a.partitions, lambda k: k[0])
             .mapPartitionsWithIndex(write_partitions(out)).collect())
    files.sort(key=lambda e: e["partition"])
    checked.unpersist()
    rejected = join_rejects(out, a.input)

    manifest = {
        "format": "doppio-bulk/1",
        "database": a.db,
        "table": a.table,
        "schemaVersion": a.schema_version,
        "partitions": a.partitions,
        "partitioner": "hash",
        "inputFingerprint": fingerprint(digests),
        "records": sum(e["records"] for e in files),
        "rejected": rejected,
        "files": files,
        "builder": BUILDER,
    }
    tmp = os.path.join(out, "manifest.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(out, "manifest.json"))
    return manifest


def clean(out):
    """Removes what a failed build wrote, so nothing looks complete."""
    if os.path.isdir(out):
        for name in os.listdir(out):
            if name.endswith(".dpb") or name.startswith(REJECTS_PART) or name in ("rejects.jsonl", "manifest.json.tmp"):
                os.remove(os.path.join(out, name))


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("doppio-bulk-build %s/%s" % (a.db, a.table)).getOrCreate()
    try:
        m = build(spark, a)
    except Exception as e:
        # A malformed input fails a task; its reason is deep in the trace.
        found = re.search(r"MalformedInput: (.*)", str(e))
        if not found and not isinstance(e, codec.MalformedInput):
            raise
        clean(a.out)
        raise SystemExit("doppio_build: %s" % (found.group(1) if found else e))
    finally:
        spark.stop()
    print("built %s: %d records in %d partitions, %d rejected" % (a.out, m["records"], m["partitions"], m["rejected"]))


if __name__ == "__main__":
    main()
