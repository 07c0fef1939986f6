// Package exportfile writes export rows (client/export) as Parquet files
// and Avro object container files, typed by the table's Avro schema.
//
// A row is a record of the key parts (string, int or long, by name), then
// for a change export _op (string), _scn (string, "generation:sequence")
// and _mtime (long, timestamp-millis), then the document's fields. In a
// change export every document field is nullable: a delete has no
// after-image.
//
// Avro files carry that record as their schema: the table's field types
// unchanged (logical types, unions, arrays, maps, named types).
//
// Parquet maps the Avro types so: boolean, int, long, float, double to
// the same physical types; string and uuid to STRING, enum to ENUM,
// bytes to BYTE_ARRAY, fixed to FIXED_LEN_BYTE_ARRAY; decimal (bytes or
// fixed) to DECIMAL(precision, scale) on the same bytes; date to DATE;
// time-millis and time-micros to TIME; timestamp-millis and
// timestamp-micros to TIMESTAMP adjusted to UTC, the local-timestamp ones
// to TIMESTAMP not adjusted; a record to a group; an array to a LIST; a
// map to a MAP with STRING keys; a ["null", T] union to an optional T;
// any other union to a group with one optional field per branch, named
// by the branch's type (the record or enum name, or "string", "long", …),
// of which one is set. Fields of a group are in name order (the Parquet
// library's order); readers find columns by name.
package exportfile
