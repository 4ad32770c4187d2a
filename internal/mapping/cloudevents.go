package mapping

import (
	"bytes"
	"strconv"
	"strings"
)

// CEAttribute maps a column to a CloudEvents attribute: subject or an
// extension (--cloudevents).
type CEAttribute struct{ Name, Column string }

// ContentType is the media type of t's records' values, for CloudEvents'
// datacontenttype: JSON for a JSON or jsonb payload, a JSON converter or
// envelope placements; text for text; bytes for bytea. "" before Check.
func (t *Table) ContentType() string {
	c := t.catalog.Load()
	if c == nil {
		return ""
	}
	switch {
	case t.ValueConverter == JSON || t.ValueConverter == JSONSchema || hasEnvelope(t.Placements):
		return "application/json"
	case t.ValueConverter == Bytes || c.payloadOID == OIDBytea:
		return "application/octet-stream"
	case c.payloadOID == OIDJSON || c.payloadOID == OIDJSONB:
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}

func hasEnvelope(ps []Placement) bool {
	for _, p := range ps {
		if p.Envelope {
			return true
		}
	}
	return false
}

// The W3C trace context headers.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// traceHeaders reads a trace context column: a traceparent value alone, or
// Java properties text (Debezium's tracing.span.context.field) with
// traceparent and tracestate lines. It returns the W3C headers found.
func traceHeaders(v []byte) []Header {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil
	}
	if !bytes.ContainsAny(v, "=:\n") && v[0] != '#' && v[0] != '!' {
		return []Header{{Key: []byte(HeaderTraceparent), Value: v}}
	}
	var out []Header
	for _, line := range strings.Split(string(v), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, val := splitProperty(line)
		if (k == HeaderTraceparent || k == HeaderTracestate) && val != "" {
			out = append(out, Header{Key: []byte(k), Value: []byte(val)})
		}
	}
	return out
}

// splitProperty splits a java.util.Properties line at its first unescaped
// '=' or ':' and unescapes both sides (\=, \:, \\, \t, \uXXXX...).
func splitProperty(line string) (key, value string) {
	var k, v strings.Builder
	cur, inKey := &k, true
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line):
			i++
			switch e := line[i]; e {
			case 't':
				cur.WriteByte('\t')
			case 'n':
				cur.WriteByte('\n')
			case 'r':
				cur.WriteByte('\r')
			case 'f':
				cur.WriteByte('\f')
			case 'u':
				if i+4 < len(line) {
					if r, err := strconv.ParseUint(line[i+1:i+5], 16, 32); err == nil {
						cur.WriteRune(rune(r))
						i += 4
						continue
					}
				}
				cur.WriteByte(e)
			default:
				cur.WriteByte(e)
			}
		case inKey && (c == '=' || c == ':'):
			cur, inKey = &v, false
		default:
			cur.WriteByte(c)
		}
	}
	return strings.TrimSpace(k.String()), strings.TrimSpace(v.String())
}
