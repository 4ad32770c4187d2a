package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
)

// tablesFile is the --tables-config file: the tables the relay relays and how.
type tablesFile struct {
	Tables []tableEntry `json:"tables"`
}

type tableEntry struct {
	Table         string         `json:"table"`
	ID            string         `json:"id"`
	Key           string         `json:"key"`
	Payload       string         `json:"payload"`
	Timestamp     string         `json:"timestamp"`
	EventType     string         `json:"event_type"`
	Headers       string         `json:"headers"`
	Topic         string         `json:"topic"`
	IDHeader      string         `json:"id_header"`
	HeaderColumns []headerColumn `json:"header_columns"`
	TraceContext  string         `json:"trace_context"`
	CloudEvents   *ceEntry       `json:"cloudevents"`
}

// ceEntry is a table's CloudEvents attributes: its source, and columns as
// subject and extensions (name: column).
type ceEntry struct {
	Source     string            `json:"source"`
	Subject    string            `json:"subject"`
	Extensions map[string]string `json:"extensions"`
}

type headerColumn struct {
	Column string `json:"column"`
	Header string `json:"header"`
}

// LoadTables reads a --tables-config file (docs/own-table.md).
// The entry "outbox.events" with nothing else relays outbox.events as
// without the file.
func LoadTables(path string) ([]*Table, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tables-config: %w", err)
	}
	tables, err := ParseTables(path, raw)
	if err != nil {
		return nil, fmt.Errorf("--tables-config %s: %w", path, err)
	}
	return tables, nil
}

// ParseTables parses a tables file's JSON.
func ParseTables(path string, raw []byte) ([]*Table, error) {
	var f tablesFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a tables file: %w", err)
	}
	if len(f.Tables) == 0 {
		return nil, fmt.Errorf(`no tables: want {"tables": [{"table": "schema.table", ...}]}`)
	}
	var tables []*Table
	seen := map[string]bool{}
	for i, e := range f.Tables {
		t := &Table{Origin: "--tables-config " + path, ID: e.ID, Key: e.Key, Payload: e.Payload,
			Timestamp: e.Timestamp, EventType: e.EventType, Headers: e.Headers, Topic: e.Topic, IDHeader: e.IDHeader,
			TraceContext: e.TraceContext}
		t.Options = map[string]string{"placed": fmt.Sprintf("tables[%d].header_columns", i)}
		for _, use := range []string{"id", "key", "payload", "timestamp", "headers", "topic"} {
			t.Options[use] = fmt.Sprintf("tables[%d].%s", i, use)
		}
		t.Options["event type"] = fmt.Sprintf("tables[%d].event_type", i)
		t.Options["trace context"] = fmt.Sprintf("tables[%d].trace_context", i)
		if err := t.cloudEvents(e.CloudEvents, fmt.Sprintf("tables[%d].cloudevents", i)); err != nil {
			return nil, err
		}
		var err error
		if t.Schema, t.Name, err = SplitName(e.Table); err != nil {
			return nil, fmt.Errorf("tables[%d]: %w", i, err)
		}
		if seen[t.QualifiedName()] {
			return nil, fmt.Errorf("tables[%d]: %s is listed twice", i, t.QualifiedName())
		}
		seen[t.QualifiedName()] = true
		for _, h := range e.HeaderColumns {
			t.Placements = append(t.Placements, Placement{Column: h.Column, Alias: h.Header})
		}
		if t.IsEvents() && (len(t.Columns()) > 0 || t.IDHeader != "" || len(t.Placements) > 0) {
			return nil, fmt.Errorf("tables[%d]: outbox.events has its own layout; list it with no other field", i)
		}
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("tables[%d]: %w", i, err)
		}
		tables = append(tables, t)
	}
	return tables, nil
}

// cloudEvents reads a table's cloudevents entry (option names it).
func (t *Table) cloudEvents(e *ceEntry, option string) error {
	if e == nil {
		return nil
	}
	if e.Source != "" {
		if err := cloudevents.CheckSource(e.Source); err != nil {
			return fmt.Errorf("%s.source: %w", option, err)
		}
	}
	t.CESource = e.Source
	if e.Subject != "" {
		t.CEAttributes = append(t.CEAttributes, CEAttribute{Name: "subject", Column: e.Subject})
		t.Options["cloudevents subject"] = option + ".subject"
	}
	names := make([]string, 0, len(e.Extensions))
	for name := range e.Extensions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := cloudevents.CheckAttribute(name); err != nil || name == "subject" {
			return fmt.Errorf("%s.extensions: %q: an extension's name is 1 to 20 lower-case letters and digits, not subject "+
				"nor one of the spec's own attributes", option, name)
		}
		t.CEAttributes = append(t.CEAttributes, CEAttribute{Name: name, Column: e.Extensions[name]})
		t.Options["cloudevents "+name] = option + ".extensions." + name
	}
	return nil
}
