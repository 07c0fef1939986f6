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
package query
