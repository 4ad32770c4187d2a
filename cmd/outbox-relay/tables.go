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

// loadTables reads --tables-config and --debezium-config into cfg.Tables
// (and, from a Debezium file, the database URL when --database-url is not
// given). A file that cannot be read or parsed is a setup error (exit 2)
// naming every option at fault.
func loadTables(cfg *relay.Config, o runOpts, log *zap.Logger) error {
	seen := map[string]string{}
	add := func(tables []*mapping.Table) error {
		for _, t := range tables {
			if first, dup := seen[t.QualifiedName()]; dup && !t.IsEvents() {
				return fmt.Errorf("%w: table %s is mapped twice (%s and %s)", cdc.ErrSetup, t.QualifiedName(), first, t.Origin)
			}
			seen[t.QualifiedName()] = t.Origin
			cfg.Tables = append(cfg.Tables, t)
		}
		return nil
	}
	if o.tablesConfig != "" {
		tables, err := mapping.LoadTables(o.tablesConfig)
		if err != nil {
			return fmt.Errorf("%w: %w", cdc.ErrSetup, err)
		}
		if err := add(tables); err != nil {
			return err
		}
	}
	if o.debeziumConfig != "" {
		d, err := mapping.LoadDebezium(o.debeziumConfig)
		if err != nil {
			return fmt.Errorf("%w: %w", cdc.ErrSetup, err)
		}
		for _, note := range d.Notes {
			log.Info("--debezium-config: option taken as it is", zap.String("option", note))
		}
		if err := add(d.Tables); err != nil {
			return err
		}
		if cfg.DatabaseURL == "" {
			if d.DatabaseURL == "" {
				return flagenv.Usagef("--database-url is required: %s has no database.hostname", o.debeziumConfig)
			}
			cfg.DatabaseURL = d.DatabaseURL
		}
	}
	for _, t := range cfg.Tables {
		if !t.IsEvents() {
			log.Info("relaying a mapped table", zap.String("table", t.QualifiedName()), zap.String("from", t.Origin),
				zap.String("mapping", describe(t)))
		}
	}
	return nil
}

// describe says in one line how t maps.
func describe(t *mapping.Table) string {
	parts := []string{"id=" + t.ID, "payload=" + t.Payload, "topic=" + t.Topic}
	if t.TopicRegex != nil {
		parts = append(parts, fmt.Sprintf("topic regex %q → %q", t.TopicRegex, t.TopicReplacement))
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
