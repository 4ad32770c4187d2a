package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Debezium's table.expand.json.payload, as JsonConverter then writes the
// value without schemas: a string payload starting with { or [ is parsed
// (Jackson's readTree: a duplicate key keeps its last value at its first
// place), a schema is inferred from it and the value rebuilt as a struct:
// null members and empty arrays are left out (nulls kept with
// table.json.payload.null.behavior=optional_bytes), numbers with a fraction
// or an exponent are doubles written as Java's Double.toString, arrays of
// objects become arrays of one struct of all their members (a missing one
// null). What Debezium leaves as it is (text that is not JSON, an array
// whose elements differ in type) stays a JSON string; what makes its
// converter fail (an integer beyond 64 bits, a member whose type differs
// between objects of an array, a top-level array) is an error.

// errExpandFails is what fails Debezium's task: the event fails.
var errExpandFails = errors.New("Debezium's expansion of this payload makes its converter fail")

// errExpandKeeps is what Debezium leaves unexpanded (a warning).
var errExpandKeeps = errors.New("kept as it is")

// jnode is a parsed JSON value.
type jnode struct {
	kind  string // struct, array, string, int32, int64, float64, boolean, null
	keys  []string
	vals  []*jnode // members (struct) or elements (array)
	text  string   // a string's value, a number's literal
	value bool
}

// expandJSON returns the expanded payload, or ok false when Debezium keeps
// the text as a string; err when Debezium's task fails on it.
func expandJSON(text []byte, keepNulls bool) (out []byte, ok bool, err error) {
	out, _, ok, err = expandJSONSchema(text, keepNulls)
	return out, ok, err
}

// expandJSONSchema is expandJSON that also returns the schema Debezium
// infers, as JsonConverter writes it with schemas ("" for the top-level
// empty array, which loses it).
func expandJSONSchema(text []byte, keepNulls bool) (out []byte, schema string, ok bool, err error) {
	trimmed := bytes.TrimSpace(text)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return nil, "", false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	n, err := parseJNode(dec)
	if err != nil {
		return nil, "", false, nil // not JSON: kept
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", false, nil
	}
	if n.kind == "array" {
		if len(n.vals) == 0 {
			return []byte(`"[]"`), "", true, nil // the schema is lost: the text, as a string
		}
		return nil, "", false, fmt.Errorf("%w: a top-level array", errExpandFails)
	}
	js, err := schemaOfJNode(n, keepNulls)
	if err != nil {
		if errors.Is(err, errExpandKeeps) {
			return nil, "", false, nil
		}
		return nil, "", false, err
	}
	var buf bytes.Buffer
	writeJNode(&buf, n, keepNulls, nil)
	var sb bytes.Buffer
	writeJSchema(&sb, js, "payload")
	return buf.Bytes(), sb.String(), true, nil
}

func parseJNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &jnode{kind: "struct"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				val, err := parseJNode(dec)
				if err != nil {
					return nil, err
				}
				if i := indexOf(n.keys, k); i >= 0 {
					n.vals[i] = val // the last value, at the first key's place
				} else {
					n.keys, n.vals = append(n.keys, k), append(n.vals, val)
				}
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &jnode{kind: "array"}
			for dec.More() {
				val, err := parseJNode(dec)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, val)
			}
			_, err := dec.Token()
			return n, err
		}
	case string:
		return &jnode{kind: "string", text: v}, nil
	case bool:
		return &jnode{kind: "boolean", value: v}, nil
	case nil:
		return &jnode{kind: "null"}, nil
	case json.Number:
		s := string(v)
		if strings.ContainsAny(s, ".eE") {
			return &jnode{kind: "float64", text: s}, nil
		}
		i, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil:
			return &jnode{kind: "bigint", text: s}, nil
		case i >= math.MinInt32 && i <= math.MaxInt32:
			return &jnode{kind: "int32", text: s}, nil
		}
		return &jnode{kind: "int64", text: s}, nil
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

func indexOf(keys []string, k string) int {
	for i, s := range keys {
		if s == k {
			return i
		}
	}
	return -1
}

// jschema is the schema Debezium infers: a kind, and for a struct its
// fields (merged over an array's objects), for an array its element's.
type jschema struct {
	kind   string
	keys   []string
	fields []*jschema
	elem   *jschema
}

// schemaOfJNode infers n's schema; nil for what is left out (null, an empty
// array).
func schemaOfJNode(n *jnode, keepNulls bool) (*jschema, error) {
	switch n.kind {
	case "bigint":
		return nil, fmt.Errorf("%w: the integer %s does not fit 64 bits", errExpandFails, n.text)
	case "null":
		if keepNulls {
			return &jschema{kind: "bytes"}, nil
		}
		return nil, nil
	case "struct":
		s := &jschema{kind: "struct"}
		for i, k := range n.keys {
			f, err := schemaOfJNode(n.vals[i], keepNulls)
			if err != nil {
				return nil, err
			}
			if f != nil {
				s.keys, s.fields = append(s.keys, k), append(s.fields, f)
			}
		}
		return s, nil
	case "array":
		if len(n.vals) == 0 {
			return nil, nil // an empty array: left out
		}
		var elem *jschema
		for _, v := range n.vals {
			if v.kind == "null" {
				continue // null elements say nothing of the type
			}
			e, err := schemaOfJNode(v, keepNulls)
			if err != nil {
				return nil, err
			}
			switch {
			case e == nil:
			case elem == nil:
				elem = e
			case elem.kind != e.kind:
				return nil, fmt.Errorf("%w: an array of %s and %s", errExpandKeeps, elem.kind, e.kind)
			case e.kind == "struct":
				if err := mergeJSchema(elem, e); err != nil {
					return nil, err
				}
			}
		}
		if elem == nil { // only nulls: bytes with optional_bytes, else a type Debezium cannot tell
			if !keepNulls {
				return nil, fmt.Errorf("%w: an array of nulls", errExpandKeeps)
			}
			elem = &jschema{kind: "bytes"}
		}
		return &jschema{kind: "array", elem: elem}, nil
	}
	return &jschema{kind: n.kind}, nil
}

// mergeJSchema adds e's fields to s, failing on a field whose type differs.
func mergeJSchema(s, e *jschema) error {
	for i, k := range e.keys {
		j := indexOf(s.keys, k)
		if j < 0 {
			s.keys, s.fields = append(s.keys, k), append(s.fields, e.fields[i])
			continue
		}
		a, b := s.fields[j], e.fields[i]
		switch {
		case a.kind == "bytes" && b.kind != "bytes": // a null member (optional_bytes) gives way to a typed one
			s.fields[j] = b
			continue
		case b.kind == "bytes":
			continue
		}
		if a.kind != b.kind {
			return fmt.Errorf("%w: member %q is %s in one element of an array and %s in another", errExpandFails, k, a.kind, b.kind)
		}
		if a.kind == "struct" {
			if err := mergeJSchema(a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeJNode writes n as JsonConverter writes the struct built from it;
// shape, when set, is the merged struct of an array's objects: its fields
// in its order, a missing member as null.
func writeJNode(buf *bytes.Buffer, n *jnode, keepNulls bool, shape *jschema) {
	switch n.kind {
	case "struct":
		buf.WriteByte('{')
		first := true
		member := func(k string, v *jnode, sub *jschema) {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			buf.Write(jsonString([]byte(k)))
			buf.WriteByte(':')
			if v == nil {
				buf.WriteString("null")
				return
			}
			writeJNode(buf, v, keepNulls, sub)
		}
		if shape != nil {
			for i, k := range shape.keys {
				var v *jnode
				if j := indexOf(n.keys, k); j >= 0 && n.vals[j].kind != "null" {
					v = n.vals[j]
				}
				member(k, v, shape.fields[i])
			}
		} else {
			for i, k := range n.keys {
				v := n.vals[i]
				s, _ := schemaOfJNode(v, keepNulls)
				if s == nil {
					continue // a null member or an empty array: left out
				}
				if v.kind == "null" {
					v = nil
				}
				member(k, v, structShape(s))
			}
		}
		buf.WriteByte('}')
	case "array":
		var elem *jschema
		if s, _ := schemaOfJNode(n, false); s != nil {
			elem = structShape(s.elem)
		}
		buf.WriteByte('[')
		for i, v := range n.vals {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJNode(buf, v, false, elem)
		}
		buf.WriteByte(']')
	case "string":
		buf.Write(jsonString([]byte(n.text)))
	case "boolean":
		buf.WriteString(strconv.FormatBool(n.value))
	case "null":
		buf.WriteString("null")
	case "float64":
		f, _ := strconv.ParseFloat(n.text, 64)
		buf.WriteString(javaDouble(f))
	default:
		buf.WriteString(n.text)
	}
}

// structShape is s when it is a struct (whose fields order what is
// written), nil otherwise.
func structShape(s *jschema) *jschema {
	if s != nil && s.kind == "struct" {
		return s
	}
	return nil
}

// javaDouble formats f as Java's Double.toString: the shortest digits that
// read back as f; plain from 10^-3 to 10^7, else d.dddE±n.
func javaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	digits := strings.Replace(mant, ".", "", 1)
	if f >= 1e-3 && f < 1e7 {
		var intPart, frac string
		if exp >= 0 {
			if len(digits) <= exp+1 {
				intPart, frac = digits+strings.Repeat("0", exp+1-len(digits)), "0"
			} else {
				intPart, frac = digits[:exp+1], digits[exp+1:]
			}
		} else {
			intPart, frac = "0", strings.Repeat("0", -exp-1)+digits
		}
		return sign + intPart + "." + frac
	}
	frac := digits[1:]
	if frac == "" {
		frac = "0"
	}
	return sign + digits[:1] + "." + frac + "E" + strconv.Itoa(exp)
}

// writeJSchema writes s as JsonConverter writes the Connect schema
// Debezium builds: every field optional, structs named by their path from
// "payload" (an array's struct by the array's).
func writeJSchema(buf *bytes.Buffer, s *jschema, name string) {
	switch s.kind {
	case "struct":
		buf.WriteString(`{"type":"struct","fields":[`)
		for i, k := range s.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			var f bytes.Buffer
			writeJSchema(&f, s.fields[i], name+"."+k)
			buf.Write(f.Bytes()[:f.Len()-1])
			buf.WriteString(`,"field":`)
			buf.Write(jsonString([]byte(k)))
			buf.WriteByte('}')
		}
		buf.WriteString(`],"optional":true,"name":`)
		buf.Write(jsonString([]byte(name)))
		buf.WriteByte('}')
	case "array":
		buf.WriteString(`{"type":"array","items":`)
		writeJSchema(buf, s.elem, name)
		buf.WriteString(`,"optional":true}`)
	case "float64":
		buf.WriteString(`{"type":"double","optional":true}`)
	default:
		buf.WriteString(`{"type":"` + s.kind + `","optional":true}`)
	}
}
