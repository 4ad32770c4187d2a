package mapping

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Column DEFAULTs as Debezium's PostgreSQL connector reads them: the
// expression pg_get_expr gives becomes the column's schema default (written
// as "default" by JsonConverter with schemas), and Kafka Connect's
// Struct.get returns that default for a NULL value, so the key, the
// payload, the id header and placed columns of a row with a NULL show the
// default. (The routing, timestamp and partition columns are read with
// typed getters, which do not.) A default computed by a function gets
// Debezium's placeholder for the type: the zero uuid, "", {}, 0, false,
// the epoch.

// pgEpoch is PostgreSQL's epoch in microseconds since 1970.
const pgEpoch = 946684800000000

// columnDefault is a column's default: its value in pgoutput's binary
// format, and as JsonConverter writes it in a schema.
type columnDefault struct {
	value []byte
	json  string
}

// debeziumDefault reads a column's DEFAULT expression as Debezium does; ok
// is false when Debezium gives the column no default (bytea, a type the
// relay does not read, a literal it cannot parse).
func debeziumDefault(oid uint32, expr string) (d columnDefault, ok bool) {
	// A literal is quoted ('x'::text: the text inside the first pair of
	// quotes), a bare number (1, -1::integer) or a boolean; anything else
	// is computed (a function, CURRENT_TIMESTAMP).
	expr = strings.TrimSpace(expr)
	literal, function := "", true
	switch {
	case strings.HasPrefix(expr, "'"):
		if end := strings.IndexByte(expr[1:], '\''); end >= 0 {
			literal, function = expr[1:1+end], false
		}
	case expr == "true" || expr == "false":
		literal, function = expr, false
	default:
		bare, _, _ := strings.Cut(strings.Trim(expr, "()"), "::")
		if _, err := strconv.ParseInt(strings.Trim(bare, "()"), 10, 64); err == nil {
			literal, function = strings.Trim(bare, "()"), false
		}
	}
	switch oid {
	case OIDUUID:
		u := make([]byte, 16)
		if !function {
			h, err := hex.DecodeString(strings.ReplaceAll(literal, "-", ""))
			if err != nil || len(h) != 16 {
				return d, false
			}
			u = h
		}
		return columnDefault{value: u, json: string(jsonString(formatUUID(u)))}, true
	case OIDText, OIDVarchar, OIDBpchar, OIDName:
		return columnDefault{value: []byte(literal), json: string(jsonString([]byte(literal)))}, true
	case OIDJSON, OIDJSONB:
		if function {
			literal = "{}"
		}
		v := []byte(literal)
		if oid == OIDJSONB {
			v = append([]byte{1}, v...)
		}
		return columnDefault{value: v, json: string(jsonString([]byte(literal)))}, true
	case OIDInt2, OIDInt4, OIDInt8:
		var n int64
		if !function {
			var err error
			if n, err = strconv.ParseInt(literal, 10, 64); err != nil {
				return d, false
			}
		}
		size := map[uint32]int{OIDInt2: 2, OIDInt4: 4, OIDInt8: 8}[oid]
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, uint64(n)) //nolint:gosec // two's complement
		return columnDefault{value: v[8-size:], json: strconv.FormatInt(n, 10)}, true
	case OIDBool:
		b := !function && (literal == "true" || literal == "t")
		v := []byte{0}
		if b {
			v[0] = 1
		}
		return columnDefault{value: v, json: strconv.FormatBool(b)}, true
	case OIDTimestamptz, OIDTimestamp:
		var t time.Time
		if !function {
			var err error
			if t, err = parsePGTime(literal, oid == OIDTimestamptz); err != nil {
				return d, false
			}
		} else {
			t = time.Unix(0, 0).UTC()
		}
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, uint64(t.UnixMicro()-pgEpoch)) //nolint:gosec // two's complement
		if oid == OIDTimestamp {
			return columnDefault{value: v, json: strconv.FormatInt(t.UnixMicro(), 10)}, true
		}
		return columnDefault{value: v, json: `"` + t.UTC().Format("2006-01-02T15:04:05.000000Z") + `"`}, true
	}
	return d, false
}

// parsePGTime reads a timestamp literal as PostgreSQL prints it
// (2024-03-01 05:29:59.5+00; without a zone for timestamp, read as UTC).
func parsePGTime(s string, zoned bool) (time.Time, error) {
	layouts := []string{"2006-01-02 15:04:05.999999"}
	if zoned {
		layouts = []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999-07:00:00"}
	}
	var err error
	for _, l := range layouts {
		var t time.Time
		if t, err = time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}
