package main

import (
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/relay"
)

// mappedFiles is what --tables-config and --debezium-config hold.
type mappedFiles struct {
	tables []*mapping.Table // the mapped tables, outbox.events left out
	// dbURL is the URL a Debezium file's database.* make ("" without them).
	dbURL string
	notes []string // the Debezium file's options that change nothing published
	// warnings say what the relay assumed of the Debezium configuration.
	warnings []string
}

// readTables reads a --tables-config and a --debezium-config file (either
// may be ""). A file that cannot be read or parsed, or a table mapped twice,
// is a setup error (exit 2) naming every option at fault.
func readTables(tablesConfig, debeziumConfig, workerConfig string, openTelemetry bool) (mappedFiles, error) {
	var f mappedFiles
	seen := map[string]string{}
	add := func(tables []*mapping.Table) error {
		for _, t := range tables {
			if t.IsEvents() {
				continue // relayed anyway
			}
			if first, dup := seen[t.QualifiedName()]; dup {
				return fmt.Errorf("%w: table %s is mapped twice (%s and %s)", cdc.ErrSetup, t.QualifiedName(), first, t.Origin)
			}
			seen[t.QualifiedName()] = t.Origin
			f.tables = append(f.tables, t)
		}
		return nil
	}
	if tablesConfig != "" {
		tables, err := mapping.LoadTables(tablesConfig)
		if err != nil {
			return f, fmt.Errorf("%w: %w", cdc.ErrSetup, err)
		}
		if err := add(tables); err != nil {
			return f, err
		}
	}
	if debeziumConfig != "" {
		d, err := mapping.LoadDebeziumWithWorker(debeziumConfig, workerConfig)
		if err != nil {
			return f, fmt.Errorf("%w: %w", cdc.ErrSetup, err)
		}
		if openTelemetry {
			d.PropagateTraceContext()
		}
		if err := add(d.Tables); err != nil {
			return f, err
		}
		f.dbURL, f.notes, f.warnings = d.DatabaseURL, d.Notes, d.Warnings
	}
	return f, nil
}

// loadTables reads the run flags' --tables-config and --debezium-config into
// cfg.Tables (and, from a Debezium file, the database URL when
// --database-url is not given), and logs what it took.
func loadTables(cfg *relay.Config, o runOpts, log *zap.Logger) error {
	f, err := readTables(o.tablesConfig, o.debeziumConfig, o.debeziumWorkerConfig, o.debeziumOpenTelemetry)
	if err != nil {
		return err
	}
	for _, note := range f.notes {
		log.Info("--debezium-config: option taken as it is", zap.String("option", note))
	}
	for _, w := range f.warnings {
		log.Warn("--debezium-config: assumed", zap.String("what", w))
	}
	switch {
	case o.debeziumConfig != "" && o.debeziumOpenTelemetry:
		log.Warn("--debezium-opentelemetry: each event's tracing.span.context.field column is passed on as its traceparent " +
			"and tracestate headers; Debezium with OpenTelemetry writes its own span's, a child of that context (README: Coming from Debezium)")
	case o.debeziumConfig != "":
		log.Info("--debezium-config: tracing.span.context.field is not read, as Debezium without OpenTelemetry; " +
			"--debezium-opentelemetry passes the context on as traceparent and tracestate headers")
	}
	cfg.Tables = f.tables
	if o.debeziumConfig != "" && cfg.DatabaseURL == "" {
		if f.dbURL == "" {
			return flagenv.Usagef("--database-url is required: %s has no database.hostname", o.debeziumConfig)
		}
		cfg.DatabaseURL = f.dbURL
	}
	for _, t := range cfg.Tables {
		log.Info("relaying a mapped table", zap.String("table", t.QualifiedName()), zap.String("from", t.Origin),
			zap.String("mapping", describe(t)))
	}
	return nil
}

// describe says in one line how t maps.
func describe(t *mapping.Table) string {
	parts := []string{"id=" + t.ID, "payload=" + t.Payload, "topic=" + t.Topic}
	if t.TopicRouter != nil {
		parts = append(parts, fmt.Sprintf("topic regex %q → %q", t.TopicRouter, t.TopicRouter.Replacement()))
	}
	if t.Key != "" {
		parts = append(parts, "key="+t.Key)
	}
	for _, p := range t.Placements {
		where := "header"
		if p.Envelope {
			where = "envelope"
		}
		parts = append(parts, fmt.Sprintf("%s→%s %s", p.Column, where, p.Alias))
	}
	parts = append(parts, "key converter "+t.KeyConverter.String(), "value converter "+t.ValueConverter.String())
	return strings.Join(parts, ", ")
}
