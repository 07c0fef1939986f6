"""Doppio's document rules in Python: what the Spark build job applies to
each record so that its partition files are byte-identical to those of
`doppio bulk build` (docs/design/bulk.md).

It holds the Go packages' rules, not their code: a table's Avro schema
compiled to nodes (internal/schema/node.go), a record validated and
normalized as a PUT of the document would be, with the same refusal
reasons (jsonin.go, document.go, keys.go), the Avro binary Doppio stores
(avro.go), the tuple encoding of keys (internal/keys/tuple.go), the hash
partition (keys.PartitionOf) and the partition file (.dpb). Pure Python
plus the xxhash package: no Spark, so each rule is testable on its own.
"""

import base64
import codecs
import decimal
import hashlib
import json
import math
import re
import struct

import xxhash

# --- Go's renderings, for refusal reasons that read as the Go builder's ---


def go_float(f):
    """fmt's %v of a float64: shortest digits, exponent form when the
    exponent is below -4 or at least 6 (or the digits' count)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = decimal.Decimal(repr(f)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    # value = 0.ds × 10^dp
    dp = len(digits) + exp
    nd = len(ds)
    eprec = 6
    if eprec > nd and nd >= dp:
        eprec = nd
    x = dp - 1
    s = "-" if sign else ""
    if x < -4 or x >= eprec:
        m = ds[0] + ("." + ds[1:] if nd > 1 else "")
        return "%s%se%s%02d" % (s, m, "-" if x < 0 else "+", abs(x))
    if dp <= 0:
        return s + "0." + "0" * (-dp) + ds
    if dp >= nd:
        return s + ds + "0" * (dp - nd)
    return s + ds[:dp] + "." + ds[dp:]


def go_quote(s):
    """strconv.Quote of a string."""
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}[ch])
        elif c < 0x20 or c == 0x7F:
            out.append("\\x%02x" % c)
        elif c < 0x10000:
            out.append("\\u%04x" % c)
        else:
            out.append("\\U%08x" % c)
    out.append('"')
    return "".join(out)


def _go_replace(err):
    # Go turns each invalid byte into its own U+FFFD; Python's "replace"
    # makes one of a whole invalid sequence.
    return ("\ufffd" * (err.end - err.start), err.end)


codecs.register_error("doppio-go", _go_replace)


def decode_utf8(b):
    """Bytes as Go reads them into a string: each invalid byte U+FFFD."""
    return b.decode("utf-8", "doppio-go")


class Number(str):
    """A JSON number as written (Go's json.Number)."""


class Refused(Exception):
    """A record Doppio refuses; the message is the reason."""


# --- schemas ---

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


class Node:
    """One compiled Avro schema node (internal/schema/node.go's node)."""

    __slots__ = ("kind", "name", "logical", "size", "symbols", "symbol_index", "items", "values",
                 "branches", "nullable", "fields", "field_index")

    def __init__(self, kind):
        self.kind = kind
        self.name = ""
        self.logical = ""
        self.size = 0
        self.symbols = None
        self.symbol_index = None
        self.items = None
        self.values = None
        self.branches = None
        self.nullable = None
        self.fields = None
        self.field_index = None

    def branch_name(self):
        return self.name or self.kind

    def type_name(self):
        k = self.kind
        if k in ("record", "enum", "fixed"):
            return k + " " + self.name
        if k == "array":
            return "array of " + self.items.type_name()
        if k == "map":
            return "map of " + self.values.type_name()
        if k == "union":
            if self.nullable is not None:
                return "nullable " + self.nullable.type_name()
            return "union [" + ", ".join(b.branch_name() for b in self.branches) + "]"
        return k

    def has_null(self):
        if self.kind == "null":
            return True
        return self.kind == "union" and any(b.kind == "null" for b in self.branches)

    def branch_named(self, name):
        for b in self.branches:
            bn = b.branch_name()
            if bn == name or (b.name and bn[bn.rfind(".") + 1:] == name):
                return b
        return None


class Field:
    __slots__ = ("name", "typ", "has_default", "default")

    def __init__(self, name, typ, has_default, default):
        self.name, self.typ, self.has_default, self.default = name, typ, has_default, default


class Table:
    """A table definition as PUT /_schemas/{db}/{table} takes it: the key
    parts and the document schema, compiled."""

    def __init__(self, definition):
        self.key = [(k["name"], k["type"]) for k in definition["key"]]
        if not self.key:
            raise ValueError("the table definition has no key")
        for name, typ in self.key:
            if typ not in ("string", "int", "long"):
                raise ValueError("key part %s: type must be string, int or long, not %s" % (name, typ))
        self._named = {}
        self._defaults = []
        self.root = self._build(definition["schema"], "")
        if self.root.kind != "record":
            raise ValueError("the document schema must be an Avro record")
        for f, raw in self._defaults:
            f.default = normalize_default(f.typ, raw)

    def _full(self, name, namespace):
        if "." in name or not namespace:
            return name
        return namespace + "." + name

    def _build(self, s, ns):
        if isinstance(s, str):
            if s in PRIMITIVES:
                return Node(s)
            full = self._full(s, ns)
            if full in self._named:
                return self._named[full]
            if s in self._named:
                return self._named[s]
            raise ValueError("unknown type %s" % s)
        if isinstance(s, list):
            n = Node("union")
            n.branches = [self._build(b, ns) for b in s]
            if not n.branches:
                raise ValueError("a union needs at least one branch")
            if len(n.branches) == 2:
                if n.branches[0].kind == "null":
                    n.nullable = n.branches[1]
                elif n.branches[1].kind == "null":
                    n.nullable = n.branches[0]
            return n
        t = s["type"]
        if isinstance(t, str) and t in PRIMITIVES:
            n = Node(t)
            n.logical = _logical(s, t)
            return n
        if not isinstance(t, str) or t not in ("record", "error", "enum", "fixed", "array", "map"):
            return self._build(t, ns)  # {"type": schema} or a named reference
        if t in ("record", "error", "enum", "fixed"):
            name = s["name"]
            space = s.get("namespace", ns) if "." not in name else name[:name.rfind(".")]
            full = self._full(name, space)
            n = Node("record" if t == "error" else t)
            n.name = full
            self._named[full] = n
            if t == "fixed":
                n.size = s["size"]
                n.logical = _logical(s, "fixed")
            elif t == "enum":
                n.symbols = list(s["symbols"])
                n.symbol_index = {sym: i for i, sym in enumerate(n.symbols)}
            else:
                n.fields, n.field_index = [], {}
                for i, fd in enumerate(s["fields"]):
                    f = Field(fd["name"], self._build(fd["type"], space), "default" in fd, None)
                    if f.has_default:
                        self._defaults.append((f, fd["default"]))
                    n.fields.append(f)
                    n.field_index[f.name] = i
            return n
        n = Node(t)
        if t == "array":
            n.items = self._build(s["items"], ns)
        else:
            n.values = self._build(s["values"], ns)
        return n

    def from_values(self, record):
        """The key and the normalized document of a record whose values
        carry their types (JSON, Avro, Parquet): the key parts taken out by
        name and parsed as a JSON key is, the rest validated as a PUT body
        (the Go builder's fromValues)."""
        for name, _ in self.key:
            if record.get(name) is None:
                raise Refused("missing key part %s" % go_quote(name))
        key = [key_from_json(name, typ, record.pop(name)) for name, typ in self.key]
        return key, self.validate(record)

    def from_cells(self, header, cells):
        """The key and the normalized document of a CSV record: key cells
        parsed as URI key segments are, other cells converted to their
        field's type (cell_value), unknown columns kept for the schema to
        name (the Go builder's fromCells)."""
        segs = [""] * len(self.key)
        keyidx = {name: i for i, (name, _) in enumerate(self.key)}
        doc = {}
        for name, cell in zip(header, cells):
            cell = "" if cell is None else cell
            if name in keyidx:
                segs[keyidx[name]] = cell
                continue
            i = self.root.field_index.get(name)
            if i is None:
                doc[name] = cell
                continue
            try:
                present, v = cell_value(self.root.fields[i].typ, cell)
            except Refused as e:
                raise Refused("field %s: %s" % (go_quote(name), e))
            if present:
                doc[name] = v
        key = [key_from_text(name, typ, segs[i]) for i, (name, typ) in enumerate(self.key)]
        return key, self.validate(doc)

    def entry(self, key, doc, partitions, max_doc):
        """(partition, encoded key, encoded document) of a valid record;
        a document encoding to more than max_doc bytes is refused, as the
        server refuses it."""
        enc = self.encode(doc)
        if len(enc) > max_doc:
            raise Refused("document is %d bytes encoded, more than the limit of %d" % (len(enc), max_doc))
        return partition_of(key, partitions), encode_tuple(key), enc

    def validate(self, doc):
        """The normalized document, as the schema package's Normalize."""
        return normalize(self.root, doc, None)

    def encode(self, doc):
        """The Avro binary Doppio stores for a normalized document."""
        out = bytearray()
        append_value(out, self.root, doc)
        return bytes(out)


def _logical(s, kind):
    lt = s.get("logicalType")
    if not lt:
        return ""
    if lt == "decimal":
        return "decimal(%d,%d)" % (s.get("precision", 0), s.get("scale", 0))
    return lt


# --- keys (internal/schema/keys.go, internal/keys/tuple.go) ---

MAX_KEY_STRING_BYTES = 1024


def _check_key_string(name, s):
    if s == "":
        raise Refused("key part %s must not be empty" % go_quote(name))
    if len(s.encode("utf-8", "surrogatepass")) > MAX_KEY_STRING_BYTES:
        raise Refused("key part %s is %d bytes long, more than %d" % (go_quote(name), len(s.encode("utf-8")), MAX_KEY_STRING_BYTES))
    return s


def key_from_text(name, typ, s):
    """A key part given as text (ParseKeySegments)."""
    if s is None:
        s = ""
    if typ == "string":
        return _check_key_string(name, s)
    digits = s[1:] if s.startswith("-") else s
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise Refused("key part %s must be a decimal integer (%s), got %s" % (go_quote(name), typ, go_quote(s)))
    v = int(s)
    lo, hi = (-(1 << 31), (1 << 31) - 1) if typ == "int" else (-(1 << 63), (1 << 63) - 1)
    if v < lo or v > hi:
        raise Refused("key part %s: %s is out of range for %s" % (go_quote(name), s, typ))
    return v


def key_from_json(name, typ, v):
    """A key part given as a JSON value (ParseKeyJSON)."""
    if typ == "string":
        if not isinstance(v, str) or isinstance(v, Number):
            raise Refused("key part %s must be a string, got %s" % (go_quote(name), json_type(v)))
        return _check_key_string(name, v)
    if isinstance(v, Number):
        return key_from_text(name, typ, str(v))
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v) or v != math.trunc(v) or not -(2.0 ** 63) <= v < 2.0 ** 63:
            raise Refused("key part %s must be an integer (%s), got %s" % (go_quote(name), typ, go_float(v)))
        i = int(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        i = v
    else:
        raise Refused("key part %s must be a number (%s), got %s" % (go_quote(name), typ, json_type(v)))
    if typ == "int" and not -(1 << 31) <= i <= (1 << 31) - 1:
        raise Refused("key part %s: %d is out of range for int (32-bit)" % (go_quote(name), i))
    return i


def encode_tuple(parts):
    """keys.EncodeTuple: byte order is tuple order."""
    out = bytearray()
    for v in parts:
        if isinstance(v, str):
            out.append(0x02)
            out += v.encode("utf-8").replace(b"\x00", b"\x00\xff")
            out += b"\x00\x01"
        else:
            out.append(0x15)
            out += struct.pack(">Q", (v & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63))
    return bytes(out)


def partition_of(key_parts, partitions):
    """keys.PartitionOf of the key's partition part (its first)."""
    return xxhash.xxh64_intdigest(encode_tuple(key_parts[:1])) % partitions


# --- normalizing (internal/schema/jsonin.go) ---


def _path_str(p):
    # p is a tuple of str (field or map key) and int (array index) parts.
    out = ""
    for part in p or ():
        if isinstance(part, int):
            out += "[%d]" % part
        else:
            out += ("." if out else "") + part
    return out


def invalid(p, msg):
    where = _path_str(p)
    return Refused((where or "document") + ": " + msg)


def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, Number):
        return "number " + v
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "unsupported value"


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str(v):
    return isinstance(v, str) and not isinstance(v, Number)


def normalize(n, v, p):
    k = n.kind
    if k == "null":
        if v is not None:
            raise invalid(p, "expected null, got %s" % json_type(v))
        return None
    if k == "boolean":
        if not isinstance(v, bool):
            raise invalid(p, "expected boolean, got %s" % json_type(v))
        return v
    if k in ("int", "long"):
        return _normalize_integer(n, v, p)
    if k in ("float", "double"):
        return _normalize_float(n, v, p)
    if k == "string":
        if not _is_str(v):
            raise invalid(p, "expected string, got %s" % json_type(v))
        return v
    if k == "enum":
        if not _is_str(v):
            raise invalid(p, "expected one of the symbols of %s, got %s" % (n.type_name(), json_type(v)))
        if v not in n.symbol_index:
            raise invalid(p, "%s is not one of the symbols of %s (%s)" % (go_quote(v), n.type_name(), ", ".join(n.symbols)))
        return v
    if k in ("bytes", "fixed"):
        if _is_str(v):
            try:
                b = base64.b64decode(v.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                raise invalid(p, "expected a base64 string (%s), got an invalid one" % n.type_name())
        elif isinstance(v, (bytes, bytearray)):
            b = bytes(v)
        else:
            raise invalid(p, "expected a base64 string (%s), got %s" % (n.type_name(), json_type(v)))
        if k == "fixed" and len(b) != n.size:
            raise invalid(p, "expected exactly %d bytes (%s), got %d" % (n.size, n.type_name(), len(b)))
        return b
    if k == "array":
        if not isinstance(v, list):
            raise invalid(p, "expected array, got %s" % json_type(v))
        base = p or ()
        return [normalize(n.items, e, base + (i,)) for i, e in enumerate(v)]
    if k == "map":
        if not isinstance(v, dict):
            raise invalid(p, "expected object (map), got %s" % json_type(v))
        base = p or ()
        return {key: normalize(n.values, e, base + (key,)) for key, e in v.items()}
    if k == "union":
        return _normalize_union(n, v, p)
    if k == "record":
        return _normalize_record(n, v, p)
    raise invalid(p, "unsupported type %s" % k)


def _unknown_field(n, m):
    unknown = [key for key in m if key not in n.field_index]
    return min(unknown, key=lambda s: s.encode("utf-8", "surrogatepass")) if unknown else None


def _normalize_record(n, v, p):
    if not isinstance(v, dict):
        raise invalid(p, "expected object (%s), got %s" % (n.type_name(), json_type(v)))
    base = p or ()
    out = {}
    found = 0
    for f in n.fields:
        if f.name not in v:
            if not f.has_default:
                k = _unknown_field(n, v)
                if k is not None:
                    raise invalid(base + (k,), "unknown field (not in %s)" % n.type_name())
                raise invalid(base + (f.name,), "required field is missing")
            out[f.name] = clone(f.default)
            continue
        found += 1
        out[f.name] = normalize(f.typ, v[f.name], base + (f.name,))
    if found != len(v):
        raise invalid(base + (_unknown_field(n, v),), "unknown field (not in %s)" % n.type_name())
    return out


def _json_fits(n, v):
    if isinstance(v, dict):
        return n.kind in ("record", "map")
    if isinstance(v, list):
        return n.kind == "array"
    if isinstance(v, bool):
        return n.kind == "boolean"
    if isinstance(v, Number) or isinstance(v, (int, float)):
        return n.kind in ("int", "long", "float", "double")
    if isinstance(v, str):
        return n.kind in ("string", "enum", "bytes", "fixed")
    return False


def _normalize_union(n, v, p):
    if v is None:
        if n.has_null():
            return None
        raise invalid(p, "expected %s, got null" % n.type_name())
    if n.nullable is not None:
        return normalize(n.nullable, v, p)
    named_err = None
    if isinstance(v, dict) and len(v) == 1:
        holds_objects = any(b.kind in ("record", "map") for b in n.branches)
        (k, e), = v.items()
        b = n.branch_named(k)
        if b is not None:
            try:
                return normalize(b, e, p)
            except Refused as err:
                if not holds_objects:
                    raise
                named_err = err
    candidate = None
    candidates = 0
    for b in n.branches:
        if b.kind == "null":
            continue
        try:
            return normalize(b, v, p)
        except Refused as err:
            if _json_fits(b, v):
                candidates += 1
                candidate = err
    if named_err is not None:
        raise named_err
    if candidates == 1:
        raise candidate
    raise invalid(p, "%s matches no branch of %s" % (json_type(v), n.type_name()))


def _normalize_integer(n, v, p):
    if isinstance(v, Number):
        s = str(v)
        body = s[1:] if s[:1] in "+-" else s
        if not body or not body.isdigit() or not body.isascii():
            raise invalid(p, "%s is not an integer (%s)" % (s, n.kind))
        i = int(s)
        if not -(1 << 63) <= i < (1 << 63):
            raise invalid(p, "%s is out of range for %s" % (s, n.kind))
    elif isinstance(v, float):
        if math.isnan(v) or math.isinf(v) or v != math.trunc(v):
            raise invalid(p, "%s is not an integer (%s)" % (go_float(v), n.kind))
        if v < -(2.0 ** 63) or v >= 2.0 ** 63:
            raise invalid(p, "%s is out of range for %s" % (go_float(v), n.kind))
        i = int(v)
    elif _is_int(v):
        i = v
    else:
        raise invalid(p, "expected %s, got %s" % (n.kind, json_type(v)))
    if n.kind == "int" and not -(1 << 31) <= i <= (1 << 31) - 1:
        raise invalid(p, "%d is out of range for int (32-bit)" % i)
    return i


def _to_float32(f):
    try:
        return struct.unpack("<f", struct.pack("<f", f))[0]
    except OverflowError:
        return math.copysign(math.inf, f)


def overflows_float(f):
    return math.isinf(_to_float32(f))


def float32_value(f32):
    """The double nearest the shortest decimal that identifies the float
    f32 (schema's float32Value)."""
    if f32 == 0 or math.isinf(f32) or math.isnan(f32):
        return f32
    for prec in range(1, 10):
        s = "%.*g" % (prec, f32)
        if _to_float32(float(s)) == f32:
            return float(s)
    return f32


def to_float(n, f):
    return float32_value(_to_float32(f)) if n.kind == "float" else f


def fits_float(f):
    if overflows_float(f):
        return False
    f32 = _to_float32(f)
    return f32 == f or float32_value(f32) == f


def _normalize_float(n, v, p):
    if isinstance(v, Number):
        try:
            f, out_of_range = go_parse_float(v)
        except ValueError:
            out_of_range = True
        if out_of_range:
            raise invalid(p, "%s is out of range for %s" % (v, n.kind))
    elif isinstance(v, float):
        f = v
    elif _is_int(v):
        f = float(v)
    else:
        raise invalid(p, "expected %s, got %s" % (n.kind, json_type(v)))
    if math.isnan(f) or math.isinf(f):
        raise invalid(p, "%s is not a finite number" % go_float(f))
    if n.kind == "float":
        if overflows_float(f):
            raise invalid(p, "%s is out of range for float" % go_float(f))
        f = to_float(n, f)
    return f


def clone(v):
    if isinstance(v, dict):
        return {k: clone(e) for k, e in v.items()}
    if isinstance(v, list):
        return [clone(e) for e in v]
    return v


def normalize_default(n, v):
    """A field's default (JSON, as in the schema) in normalized form."""
    k = n.kind
    if k == "null":
        return None
    if k == "boolean":
        return bool(v)
    if k in ("int", "long"):
        return int(v)
    if k in ("float", "double"):
        return to_float(n, float(v))
    if k in ("string", "enum"):
        return v
    if k in ("bytes", "fixed"):
        return v.encode("utf-8") if isinstance(v, str) else bytes(v)
    if k == "array":
        return [normalize_default(n.items, e) for e in v]
    if k == "map":
        return {key: normalize_default(n.values, e) for key, e in v.items()}
    if k == "union":
        return normalize_default(n.branches[0], v)
    if k == "record":
        out = {}
        for f in n.fields:
            out[f.name] = normalize_default(f.typ, v[f.name]) if f.name in v else clone(f.default)
        return out
    raise ValueError("unknown kind %s" % k)


# --- Avro binary (internal/schema/avro.go) ---


def append_long(out, v):
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    append_uvarint(out, u)


def append_uvarint(out, u):
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


class NotNormalized(Exception):
    pass


def _fits(n, v):
    """Whether the normalized value v is one n can hold (appendValue
    without an error), for choosing a union's branch."""
    k = n.kind
    if k == "null":
        return v is None
    if k == "boolean":
        return isinstance(v, bool)
    if k == "int":
        return _is_int(v) and -(1 << 31) <= v <= (1 << 31) - 1
    if k == "long":
        return _is_int(v)
    if k in ("float", "double"):
        return isinstance(v, float)
    if k == "bytes":
        return isinstance(v, bytes)
    if k == "fixed":
        return isinstance(v, bytes) and len(v) == n.size
    if k == "string":
        return isinstance(v, str)
    if k == "enum":
        return isinstance(v, str) and v in n.symbol_index
    if k == "array":
        return v is None or (isinstance(v, list) and all(_fits(n.items, e) for e in v))
    if k == "map":
        return v is None or (isinstance(v, dict) and all(_fits(n.values, e) for e in v.values()))
    if k == "union":
        return any(_union_branch_ok(b, v) for b in n.branches)
    if k == "record":
        if not isinstance(v, dict):
            return False
        for f in n.fields:
            if f.name in v:
                if not _fits(f.typ, v[f.name]):
                    return False
            elif not f.has_default:
                return False
        return all(key in n.field_index for key in v)
    return False


def _union_branch_ok(b, v):
    if (v is None) != (b.kind == "null"):
        return False
    if isinstance(v, float) and b.kind == "float" and not fits_float(v):
        return False
    return _fits(b, v)


def append_value(out, n, v):
    k = n.kind
    if k == "null":
        return
    if k == "boolean":
        out.append(1 if v else 0)
    elif k in ("int", "long"):
        append_long(out, v)
    elif k == "float":
        out += struct.pack("<f", v)
    elif k == "double":
        out += struct.pack("<d", v)
    elif k == "bytes":
        append_long(out, len(v))
        out += v
    elif k == "fixed":
        out += v
    elif k == "string":
        b = v.encode("utf-8")
        append_long(out, len(b))
        out += b
    elif k == "enum":
        append_long(out, n.symbol_index[v])
    elif k == "array":
        if v:
            append_long(out, len(v))
            for e in v:
                append_value(out, n.items, e)
        out.append(0)
    elif k == "map":
        if v:
            append_long(out, len(v))
            # Key order is free in Avro; byte order makes the bytes the
            # same whichever builder wrote them.
            for key in sorted(v, key=lambda s: s.encode("utf-8")):
                b = key.encode("utf-8")
                append_long(out, len(b))
                out += b
                append_value(out, n.values, v[key])
        out.append(0)
    elif k == "union":
        for i, b in enumerate(n.branches):
            if _union_branch_ok(b, v):
                append_long(out, i)
                append_value(out, b, v)
                return
        raise NotNormalized("%s fits no branch of %s" % (type(v).__name__, n.type_name()))
    elif k == "record":
        for f in n.fields:
            append_value(out, f.typ, v[f.name] if f.name in v else f.default)
    else:
        raise NotNormalized("unknown kind %s" % k)


def check_native(v):
    """v, unless a value decoded from Avro or Parquet has no Doppio form
    (a decimal), which is refused as the Go builder refuses it."""
    if isinstance(v, dict):
        for e in v.values():
            check_native(e)
    elif isinstance(v, list):
        for e in v:
            check_native(e)
    elif isinstance(v, decimal.Decimal):
        raise Refused("decimal values are not supported in bulk inputs")
    return v


# --- JSON Lines ---


class MalformedInput(Exception):
    """An input that is not of its format: the build fails, naming where."""


def _no_constant(name):
    raise ValueError("invalid literal %s" % name)


def _fix_surrogates(v):
    # Go's parser turns an unpaired surrogate escape into U+FFFD.
    if isinstance(v, str) and not isinstance(v, Number):
        return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace") if _has_surrogate(v) else v
    if isinstance(v, list):
        return [_fix_surrogates(e) for e in v]
    if isinstance(v, dict):
        return {_fix_surrogates(k): _fix_surrogates(e) for k, e in v.items()}
    return v


def _has_surrogate(s):
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def parse_json_line(line, where):
    """One JSON Lines record: a dict, numbers as Number. A line that is not
    JSON is MalformedInput (where names it); JSON other than an object is
    Refused."""
    text = decode_utf8(line) if isinstance(line, bytes) else line
    try:
        v = json.loads(text, parse_int=Number, parse_float=Number, parse_constant=_no_constant)
    except ValueError as e:
        raise MalformedInput("%s: %s" % (where, _json_error(e)))
    if "\\u" in text:
        v = _fix_surrogates(v)
    if v is None:
        raise Refused("the record must be a JSON object, not null")
    if not isinstance(v, dict):
        raise Refused("the record must be a JSON object")
    return v


def _json_error(e):
    if isinstance(e, json.JSONDecodeError):
        return "%s (at byte %d)" % (e.msg, len(e.doc[:e.pos].encode("utf-8")))
    return str(e)


# --- CSV cells (the Go builder's cellValue) ---

_GO_INT = re.compile(r"[+-]?[0-9]+\Z")
_GO_DEC = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_GO_HEX = re.compile(r"[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+\Z")
_GO_SPECIAL = re.compile(r"[+-]?(inf|infinity|nan)\Z", re.IGNORECASE)


def go_parse_float(s):
    """strconv.ParseFloat(s, 64): (value, out of range); ValueError when s
    is not a number Go reads."""
    if _GO_SPECIAL.match(s):
        return float(s), False
    if _GO_HEX.match(s):
        f = float.fromhex(s)
    elif _GO_DEC.match(s):
        f = float(s)
    else:
        raise ValueError(s)
    return f, math.isinf(f)


def _not_a(cell, what):
    return Refused("%s is not a %s" % (go_quote(cell), what))


def _json_cell(cell):
    return json.loads(cell, parse_int=Number, parse_float=Number, parse_constant=_no_constant)


def cell_value(n, cell):
    """A CSV cell as the JSON form of a value of type n: (present, value).
    An empty cell is null where n admits null, the empty string for a
    string, and otherwise absent (so the field's default applies)."""
    k = n.kind
    if k == "union":
        other = [b for b in n.branches if b.kind != "null"]
        if cell == "" and len(other) < len(n.branches):
            return True, None
        if len(other) == 1:
            return cell_value(other[0], cell)
        try:
            return True, _json_cell(cell)
        except ValueError:
            return True, cell
    if k in ("string", "enum", "bytes", "fixed"):
        if cell == "" and k != "string":
            return False, None
        return True, cell
    if k == "null":
        if cell != "":
            raise _not_a(cell, "null (an empty cell)")
        return True, None
    if k == "boolean":
        if cell == "":
            return False, None
        if cell in ("true", "false"):
            return True, cell == "true"
        raise _not_a(cell, "boolean (true or false)")
    if k in ("int", "long"):
        if cell == "":
            return False, None
        if not _GO_INT.match(cell):
            raise _not_a(cell, "decimal integer")
        return True, Number(cell)
    if k in ("float", "double"):
        if cell == "":
            return False, None
        try:
            go_parse_float(cell)
        except ValueError:
            raise _not_a(cell, "number")
        return True, Number(cell)
    if cell == "":
        return False, None
    try:
        return True, _json_cell(cell)
    except ValueError:
        raise _not_a(cell, "JSON value")


# --- the partition file ---

MAGIC = b"DOPPIOB1"


def partition_file_name(p):
    """The conventional name of partition p's file."""
    return "p-%05d.dpb" % p


class PartitionWriter:
    """Writes one .dpb partition file: records in strictly increasing key
    order, then the end mark and the record count; keeps the manifest's
    figures (bytes, SHA-256, first and last key)."""

    def __init__(self, f):
        self.f = f
        self.sha = hashlib.sha256()
        self.bytes = 0
        self.records = 0
        self.first = None
        self.last = None
        self._write(MAGIC)

    def _write(self, b):
        self.f.write(b)
        self.sha.update(b)
        self.bytes += len(b)

    def add(self, key, doc):
        if self.last is not None and key <= self.last:
            raise ValueError("keys out of order")
        buf = bytearray()
        append_uvarint(buf, len(key))
        buf += key
        append_uvarint(buf, len(doc))
        buf += doc
        self._write(bytes(buf))
        if self.first is None:
            self.first = key
        self.last = key
        self.records += 1

    def close(self):
        buf = bytearray()
        append_uvarint(buf, 0)
        append_uvarint(buf, self.records)
        self._write(bytes(buf))
