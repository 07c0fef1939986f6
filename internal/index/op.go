package index

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// Op is a node of an executable query over the index lists of one
// collection: what the query planner produces and Execute runs. Field names
// are dotted paths of indexed fields; values are in normalized document form
// (string, []byte, int64, float64, bool) of the field's type, and text terms
// are already tokenized (Tokenize).
type Op interface {
	String() string
	op()
}

// All matches every document of the collection.
type All struct{}

// Equal matches documents whose field holds Value: an attribute value (any
// element, for an array) or, for a text field (Text set), the term Value.
type Equal struct {
	Field string
	Value any
	Text  bool
}

// Phrase matches documents whose text field holds Terms at consecutive
// positions (within one element of an array).
type Phrase struct {
	Field string
	Terms []string
}

// Range matches documents whose field holds a value between Lower and Upper
// (nil: unbounded), each bound inclusive or not. Both nil: the field has a
// value.
type Range struct {
	Field          string
	Lower, Upper   any
	LowerInclusive bool
	UpperInclusive bool
}

// Prefix matches documents whose string, enum or bytes attribute, or one of
// whose text terms (Text set), starts with Prefix.
type Prefix struct {
	Field  string
	Prefix string
	Text   bool
}

// And matches documents matched by every operand.
type And []Op

// Or matches documents matched by some operand.
type Or []Op

// Not matches the documents of the collection Op does not match.
type Not struct{ Op Op }

func (All) op()    {}
func (Equal) op()  {}
func (Phrase) op() {}
func (Range) op()  {}
func (Prefix) op() {}
func (And) op()    {}
func (Or) op()     {}
func (Not) op()    {}

func (All) String() string     { return "*" }
func (o Equal) String() string { return o.Field + "=" + FormatValue(o.Value) }
func (o Phrase) String() string {
	q := make([]string, len(o.Terms))
	for i, t := range o.Terms {
		q[i] = strconv.Quote(t)
	}
	return o.Field + "~(" + strings.Join(q, " ") + ")"
}
func (o Range) String() string {
	lb, ub := "(", ")"
	if o.LowerInclusive {
		lb = "["
	}
	if o.UpperInclusive {
		ub = "]"
	}
	lo, hi := "*", "*"
	if o.Lower != nil {
		lo = FormatValue(o.Lower)
	}
	if o.Upper != nil {
		hi = FormatValue(o.Upper)
	}
	return o.Field + " in " + lb + lo + ", " + hi + ub
}
func (o Prefix) String() string { return o.Field + "^=" + strconv.Quote(o.Prefix) }
func (o And) String() string    { return list("and", o) }
func (o Or) String() string     { return list("or", o) }
func (o Not) String() string    { return "not(" + o.Op.String() + ")" }

func list(name string, ops []Op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = o.String()
	}
	return name + "(" + strings.Join(s, ", ") + ")"
}

// FormatValue renders a value of normalized document form unambiguously:
// strings quoted, bytes as b64"…", numbers and booleans bare.
func FormatValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []byte:
		return `b64"` + base64.StdEncoding.EncodeToString(v) + `"`
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64) + "f"
	case bool:
		return strconv.FormatBool(v)
	}
	return "?"
}

// Sort orders results by an attribute-indexed field. The zero Sort is
// document key order.
type Sort struct {
	Field string
	// Desc orders by (value, key) descending, the exact reverse of ascending.
	Desc bool
	// Multi says the field is an array: a document sorts by its smallest
	// value ascending and by its largest value descending.
	Multi bool
}

func (s Sort) String() string {
	switch {
	case s.Field == "":
		return "key"
	case s.Desc:
		return "-" + s.Field
	}
	return s.Field
}
