package mapping

import "fmt"

// PostgreSQL type OIDs the relay reads: outbox.events' layout and the
// mappings of other tables.
const (
	OIDBool        = 16
	OIDBytea       = 17
	OIDName        = 19
	OIDInt8        = 20
	OIDInt2        = 21
	OIDInt4        = 23
	OIDText        = 25
	OIDJSON        = 114
	OIDBpchar      = 1042
	OIDVarchar     = 1043
	OIDTimestamp   = 1114
	OIDTimestamptz = 1184
	OIDUUID        = 2950
	OIDJSONB       = 3802
)

// TypeName names the common built-in types for error messages.
func TypeName(oid uint32) string {
	names := map[uint32]string{
		OIDBool: "boolean", OIDInt8: "bigint", OIDInt2: "smallint", OIDInt4: "integer", 142: "xml", 700: "real",
		701: "double precision", 1700: "numeric", OIDUUID: "uuid", OIDTimestamptz: "timestamptz",
		OIDTimestamp: "timestamp", OIDBytea: "bytea", OIDText: "text", OIDJSON: "json", OIDJSONB: "jsonb",
		OIDVarchar: "varchar", OIDBpchar: "character", OIDName: "name", 1082: "date", 869: "inet",
	}
	if n, ok := names[oid]; ok {
		return n
	}
	return fmt.Sprintf("oid %d", oid)
}
