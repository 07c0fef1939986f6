package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/hamba/avro/v2"
)

// NextVersion returns def with schema appended as a new version if it is
// compatible both ways with the latest one, def unchanged with changed=false
// if schema equals the latest (canonical form), or a *problem.Error: Conflict
// naming the field and the reason when incompatible, Malformed when schema
// is not a valid Avro record schema.
func NextVersion(def TableDef, schema []byte) (next TableDef, changed bool, err error) {
	c, err := compileSchema(schema)
	if err != nil {
		return def, false, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		return def, false, problem.Field(problem.Malformed, "schema", "malformed schema JSON: %v", err)
	}
	if n := len(def.Versions); n > 0 {
		latest, err := compileSchema(def.Versions[n-1].Schema)
		if err != nil {
			return def, false, fmt.Errorf("schema: table %s: latest version %d does not compile: %w", def.Name, def.Versions[n-1].Version, err)
		}
		if latest.signature == c.signature {
			return def, false, nil
		}
		if err := checkMutual(latest, c, def.Versions[n-1].Version); err != nil {
			return def, false, err
		}
	}
	next = def
	next.Versions = append(slices.Clip(def.Versions), Version{
		Version: len(def.Versions) + 1,
		Schema:  json.RawMessage(compact.Bytes()),
		Created: time.Now().UTC(),
	})
	return next, true, nil
}

// checkMutual reports, as a Conflict naming the field, why documents of one
// version could not be read at the other.
func checkMutual(old, nw *compiled, oldVersion int) error {
	ck := compatChecker{oldVersion: oldVersion, seen: map[compatKey]bool{}}
	if err := ck.check(nw.root, old.root, "", true); err != nil {
		return err
	}
	if err := ck.check(old.root, nw.root, "", false); err != nil {
		return err
	}
	// hamba's checker as a backstop for anything the walk above misses.
	sc := avro.NewSchemaCompatibility()
	for _, pair := range [][2]avro.Schema{{nw.avro, old.avro}, {old.avro, nw.avro}} {
		if err := sc.Compatible(pair[0], pair[1]); err != nil {
			return problem.New(problem.Conflict, "schema is not compatible both ways with version %d: %v", oldVersion, err)
		}
	}
	return nil
}

type compatKey struct {
	r, w    *node
	forward bool
}

type compatChecker struct {
	oldVersion int
	seen       map[compatKey]bool
}

// check verifies that reader r reads what writer w wrote. forward is true
// when r is the new version (reading documents written before), false when
// r is the old version (reading documents the new version will write).
func (ck *compatChecker) check(r, w *node, path string, forward bool) error {
	key := compatKey{r, w, forward}
	if ck.seen[key] {
		return nil
	}
	ck.seen[key] = true
	label := path
	if label == "" {
		label = "document"
	}
	conflict := func(format string, args ...any) error {
		return problem.Field(problem.Conflict, path, format, args...)
	}
	oldN, newN := w, r
	if !forward {
		oldN, newN = r, w
	}
	if r.kind != w.kind || r.logical != w.logical {
		return conflict("field %q changed type from %s to %s: Avro cannot resolve it both ways, so documents of one version could not be read at the other", label, describe(oldN), describe(newN))
	}
	switch r.kind {
	case kRecord, kEnum, kFixed:
		if r.name != w.name {
			return conflict("field %q: type %s renamed to %s: named types must keep their name", label, oldN.name, newN.name)
		}
	}
	switch r.kind {
	case kFixed:
		if r.size != w.size {
			return conflict("field %q: fixed %s changed size from %d to %d", label, r.name, oldN.size, newN.size)
		}
	case kEnum:
		if r.enumDefault >= 0 {
			return nil
		}
		for _, s := range w.symbols {
			if _, ok := r.symbolIndex[s]; ok {
				continue
			}
			if forward {
				return conflict("field %q: symbol %q removed from enum %s, which has no default: documents written before cannot be read", label, s, r.name)
			}
			return conflict("field %q: symbol %q added to enum %s, whose version %d has no default: version %d cannot read documents holding it", label, s, r.name, ck.oldVersion, ck.oldVersion)
		}
	case kArray:
		return ck.check(r.items, w.items, path, forward)
	case kMap:
		return ck.check(r.values, w.values, path, forward)
	case kUnion:
		for _, wb := range w.branches {
			rb := r.branchNamed(wb.unionBranchName())
			if rb == nil {
				if forward {
					return conflict("field %q: union branch %s removed: documents written before cannot be read", label, wb.unionBranchName())
				}
				return conflict("field %q: union branch %s added: version %d cannot read documents holding it", label, wb.unionBranchName(), ck.oldVersion)
			}
			if err := ck.check(rb, wb, path, forward); err != nil {
				return err
			}
		}
	case kRecord:
		taken := make([]bool, len(r.fields))
		for _, wf := range w.fields {
			ri := readerField(r, wf.name)
			if ri < 0 || taken[ri] {
				continue
			}
			taken[ri] = true
			rf := r.fields[ri]
			if err := ck.check(rf.typ, wf.typ, joinPath(path, rf.name), forward); err != nil {
				return err
			}
		}
		for i, rf := range r.fields {
			if taken[i] || rf.hasDefault {
				continue
			}
			p := joinPath(path, rf.name)
			if forward {
				return problem.Field(problem.Conflict, p, "field %q added without a default: documents written before cannot be read", p)
			}
			return problem.Field(problem.Conflict, p, "field %q removed but it had no default in version %d: version %d cannot read documents written without it", p, ck.oldVersion, ck.oldVersion)
		}
	}
	return nil
}

func describe(n *node) string {
	if n.logical != "" {
		return n.typeName() + " (" + n.logical + ")"
	}
	return n.typeName()
}
