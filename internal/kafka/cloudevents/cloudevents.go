// Package cloudevents writes an event's Kafka record as a CloudEvent,
// following the CloudEvents 1.0 Kafka protocol binding: binary mode (the
// value as it is, the attributes as ce_ headers) or structured mode (the
// whole event as application/cloudevents+json). It only writes; consumers
// read the records with any CloudEvents SDK (the tests use sdk-go's).
package cloudevents

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
)

// Mode is how events are written: not as CloudEvents, binary or
// structured.
type Mode string

// The modes.
const (
	Off        Mode = ""
	Binary     Mode = "binary"
	Structured Mode = "structured"
)

// SpecVersion is the CloudEvents version written.
const SpecVersion = "1.0"

// ContentTypeStructured is a structured record's content-type.
const ContentTypeStructured = "application/cloudevents+json; charset=UTF-8"

// Config configures the encoding.
type Config struct {
	Mode Mode
	// Source is every event's source; "" for each table's default
	// (DefaultSource).
	Source string
	// DefaultType is the type of an event without one; "" makes such an
	// event FAILED (ErrNoType).
	DefaultType string
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch c.Mode {
	case Off, Binary, Structured:
	default:
		return fmt.Errorf("--cloudevents %q: binary, structured, or empty for none", c.Mode)
	}
	if c.Mode == Off && (c.Source != "" || c.DefaultType != "") {
		return errors.New("--cloudevents-source and --cloudevents-default-type need --cloudevents binary or structured")
	}
	if c.Source != "" {
		if err := CheckSource(c.Source); err != nil {
			return fmt.Errorf("--cloudevents-source: %w", err)
		}
	}
	if c.DefaultType != "" {
		if err := CheckString("type", []byte(c.DefaultType)); err != nil {
			return fmt.Errorf("--cloudevents-default-type: %w", err)
		}
	}
	return nil
}

// DefaultSource is a table's source unless configured: the database and
// the table, as a URI reference (/orders_db/outbox.events), each
// percent-encoded as a path segment (a database "shop db" is /shop%20db/...).
func DefaultSource(database, table string) string {
	return "/" + url.PathEscape(database) + "/" + url.PathEscape(table)
}

// CheckSource says why s is not a source: the spec's source is a
// non-empty URI-reference (RFC 3986): only its characters, a percent sign
// followed by two hex digits, and a form net/url parses.
func CheckSource(s string) error {
	if s == "" {
		return errors.New("a CloudEvents source must not be empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
		default:
			return fmt.Errorf("%q is not a URI-reference: byte %d (%q) must be percent-encoded", s, i, c)
		}
	}
	if _, err := url.Parse(s); err != nil {
		return fmt.Errorf("%q is not a URI-reference: %w", s, err)
	}
	return nil
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// CheckString says why v cannot be the value of a string attribute: the
// spec's String is a sequence of Unicode characters other than controls
// (U+0000-U+001F, U+007F-U+009F), so a value must be valid UTF-8 without
// them (a newline in a ce_ header is the risk).
func CheckString(attribute string, v []byte) error {
	for i := 0; i < len(v); {
		if c := v[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return fmt.Errorf("CloudEvents attribute %s holds control character %U at byte %d; the spec allows none", attribute, rune(c), i)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(v[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("CloudEvents attribute %s is not valid UTF-8 (byte %d)", attribute, i)
		}
		if r <= 0x9f {
			return fmt.Errorf("CloudEvents attribute %s holds control character %U at byte %d; the spec allows none", attribute, r, i)
		}
		i += size
	}
	return nil
}

// Attribute is an optional attribute (subject, or an extension) and its
// value.
type Attribute struct {
	Name  string
	Value []byte
}

// Event is what the encoding needs of an event beside its record. Its
// slices may be shared between events: the encoding never changes them.
type Event struct {
	ID     []byte // the event's id as text
	Source []byte // nil: Config.Source
	Type   []byte // nil: Config.DefaultType
	Time   time.Time
	// ContentType is the value's media type (application/json for a JSON
	// payload); nil for none.
	ContentType []byte
	// Attributes are the optional attributes: subject and extensions.
	Attributes []Attribute
}

// The binary mode's header names and the spec version, shared by every
// record (sarama only reads them).
var (
	hSpecVersion = []byte("ce_specversion")
	hID          = []byte("ce_id")
	hSource      = []byte("ce_source")
	hType        = []byte("ce_type")
	hTime        = []byte("ce_time")
	hContentType = []byte("content-type")
	vSpecVersion = []byte(SpecVersion)
	vStructured  = []byte(ContentTypeStructured)
)

// ErrNoType says an event has no type and no default is configured.
var ErrNoType = errors.New("a CloudEvent needs a type: the event has no event type and --cloudevents-default-type is not set")

// ErrNoID says an event's id is empty, which the spec forbids (and which
// an SDK replaces with a random id on every read, defeating deduplication).
var ErrNoID = errors.New("a CloudEvent needs a non-empty id: the event's id is empty")

// extensionName is what the spec allows an extension's name: lower-case
// letters and digits.
var extensionName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// reserved are attribute names an extension may not take.
var reserved = map[string]bool{"specversion": true, "id": true, "source": true, "type": true, "time": true,
	"datacontenttype": true, "dataschema": true, "data": true, "data_base64": true}

// CheckAttribute says whether name can be an optional attribute: subject
// or an extension's name.
func CheckAttribute(name string) error {
	if name == "subject" {
		return nil
	}
	if !extensionName.MatchString(name) || reserved[name] {
		return fmt.Errorf("CloudEvents attribute %q: subject, or an extension's name of 1 to 20 lower-case letters and digits, "+
			"not one of the spec's own", name)
	}
	return nil
}

// Encode writes r, built as the relay builds any record, as a CloudEvent.
// Binary mode adds the ce_ headers and content-type; structured mode
// replaces the value with the event and adds content-type. The record's
// other headers stay.
func (c *Config) Encode(r *sarama.ProducerMessage, ev Event) error {
	typ := ev.Type
	if len(typ) == 0 {
		if c.DefaultType == "" {
			return ErrNoType
		}
		typ = []byte(c.DefaultType)
	}
	source := ev.Source
	if c.Source != "" || source == nil {
		source = []byte(c.Source)
	}
	if err := check(ev, source, typ); err != nil {
		return err
	}
	ts := ev.Time.UTC().AppendFormat(make([]byte, 0, len(time.RFC3339Nano)), time.RFC3339Nano)
	mode := c.Mode
	if mode == Structured && r.Value == nil {
		// A tombstone stays one: a null value, its attributes as the
		// binary mode's ce_ headers (an SDK reads an event without data).
		mode = Binary
	}
	switch mode {
	case Binary:
		hs := make([]sarama.RecordHeader, len(r.Headers), len(r.Headers)+6+len(ev.Attributes))
		copy(hs, r.Headers)
		hs = append(hs, sarama.RecordHeader{Key: hSpecVersion, Value: vSpecVersion}, sarama.RecordHeader{Key: hID, Value: ev.ID},
			sarama.RecordHeader{Key: hSource, Value: source}, sarama.RecordHeader{Key: hType, Value: typ},
			sarama.RecordHeader{Key: hTime, Value: ts})
		if r.Value != nil && ev.ContentType != nil {
			hs = append(hs, sarama.RecordHeader{Key: hContentType, Value: ev.ContentType})
		}
		for _, a := range ev.Attributes {
			if omitted(a) {
				continue
			}
			hs = append(hs, sarama.RecordHeader{Key: []byte("ce_" + a.Name), Value: a.Value})
		}
		r.Headers = hs
	case Structured:
		v, err := structured(r, ev, source, typ, ts)
		if err != nil {
			return err
		}
		r.Value = sarama.ByteEncoder(v)
		r.Headers = append(r.Headers, sarama.RecordHeader{Key: hContentType, Value: vStructured})
	}
	return nil
}

// check says why ev cannot be a valid CloudEvent: an empty id, or a string
// attribute the spec does not allow.
func check(ev Event, source, typ []byte) error {
	if len(ev.ID) == 0 {
		return ErrNoID
	}
	for _, a := range [...]struct {
		name string
		v    []byte
	}{{"id", ev.ID}, {"source", source}, {"type", typ}, {"datacontenttype", ev.ContentType}} {
		if err := CheckString(a.name, a.v); err != nil {
			return err
		}
	}
	for _, a := range ev.Attributes {
		if err := CheckString(a.Name, a.Value); err != nil {
			return err
		}
	}
	return nil
}

// omitted reports whether an optional attribute is left out: an empty
// subject, which the spec says must be non-empty when present.
func omitted(a Attribute) bool { return len(a.Value) == 0 && a.Name == "subject" }

// structured is the event in the JSON format: data holds a JSON value as
// JSON, text (valid UTF-8 of a text/* type) as a JSON string, any other
// value as data_base64.
func structured(r *sarama.ProducerMessage, ev Event, source, typ, ts []byte) ([]byte, error) {
	var value []byte
	if r.Value != nil {
		var err error
		if value, err = r.Value.Encode(); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 0, len(value)*4/3+256)
	str := func(name string, v []byte) {
		if !utf8.Valid(v) {
			v = []byte(strings.ToValidUTF8(string(v), "\uFFFD"))
		}
		q, _ := json.Marshal(string(v)) // a string always marshals
		buf = append(buf, ',', '"')
		buf = append(buf, name...)
		buf = append(buf, '"', ':')
		buf = append(buf, q...)
	}
	buf = append(buf, `{"specversion":"`+SpecVersion+`"`...)
	str("id", ev.ID)
	str("source", source)
	str("type", typ)
	str("time", ts)
	for _, a := range ev.Attributes {
		if !omitted(a) {
			str(a.Name, a.Value)
		}
	}
	if value != nil {
		if ev.ContentType != nil {
			str("datacontenttype", ev.ContentType)
		}
		switch {
		case isJSON(string(ev.ContentType)) && json.Valid(value):
			buf = append(buf, `,"data":`...)
			buf = append(buf, value...)
		case isText(string(ev.ContentType)) && utf8.Valid(value):
			q, _ := json.Marshal(string(value)) // a string always marshals
			buf = append(buf, `,"data":`...)
			buf = append(buf, q...)
		default:
			buf = append(buf, `,"data_base64":"`...)
			buf = base64.StdEncoding.AppendEncode(buf, value)
			buf = append(buf, '"')
		}
	}
	return append(buf, '}'), nil
}

// isText reports whether a media type is text: text/*.
func isText(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.HasPrefix(strings.TrimSpace(strings.ToLower(mt)), "text/")
}

// isJSON reports whether a media type is JSON's.
func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
