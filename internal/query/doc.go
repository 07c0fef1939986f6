// Package query parses Doppio's Lucene-like query language and plans a
// query against a table's indexes. It is pure: no I/O.
//
// Parse turns the text into a tree of Nodes (syntax only). Build binds that
// tree to the indexed fields of a table — checking each field is indexed,
// converting each value by the field's type, tokenizing text like the index
// does — and produces a Plan whose operators (package index) Execute runs
// over one collection's index lists. Compile does both.
//
// Every error a user can cause is a *problem.Error of Kind Malformed whose
// Field is "query" (or "sort") and whose detail gives the 1-based character
// position in the query and the reason.
//
// # Binding
//
// Each clause names an indexed field (a bare word or phrase: every text
// field). A value is converted by the field's type: int, long: an integer
// (timestamp-millis/-micros fields also take RFC 3339 times, date fields
// YYYY-MM-DD); float, double: a finite number; boolean: true or false;
// string, enum: as is; bytes: base64. Quoting an attribute value only
// protects its characters: it is still one exact value. On a text field the
// value is tokenized like indexed text: one term is a term query, several a
// phrase. A prefix needs a string, enum or text field (one word, on text); a
// range an attribute field. Sorting needs an attribute field; an array
// field sorts by its smallest value ascending, its largest descending.
package query
