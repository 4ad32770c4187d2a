package relay

import (
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// Failure reasons in outbox.deliveries.failure_reason.
const (
	ReasonInvalidEvent        = store.ReasonInvalidEvent
	ReasonInvalidTopic        = kafka.ReasonInvalidTopic
	ReasonTopicNotAllowed     = kafka.ReasonTopicNotAllowed
	ReasonUnauthorizedOnTopic = kafka.ReasonUnauthorizedOnTopic
	ReasonMessageTooLarge     = kafka.ReasonMessageTooLarge
	ReasonInvalidPartition    = kafka.ReasonInvalidPartition
	ReasonRetriesExhausted    = store.ReasonRetriesExhausted
)

// FailureReason says when the relay writes a failure_reason and what an
// operator does about it.
type FailureReason struct {
	Reason string
	When   string // what happened to the event
	Fix    string // what to do, before resending it
}

// FailureReasons is every failure_reason the relay writes, in the order an
// operator meets them; docs/troubleshooting.md is generated from it, and a
// test fails when a Reason constant is missing here.
var FailureReasons = []FailureReason{
	{ReasonInvalidEvent,
		"The row cannot be a Kafka record: `headers` is not an object of strings or uses a header name the relay " +
			"writes itself (`outbox-event-*`, `outbox-dlt-*`, `__connect.errors.*`; with `--cloudevents` also `ce_*` and " +
			"`content-type`), the topic is empty, the payload's type " +
			"cannot be read, `created_at` is outside what a record's timestamp can carry (1970-01-01 to 2262-04-11 UTC), " +
			"a tombstone has no key, a mapped table's row does not fit its mapping (a NULL routing column, a topic regex " +
			"that does not match), the record is not a valid CloudEvent; or the broker refused the record itself " +
			"(`INVALID_RECORD`, `INVALID_TIMESTAMP`) or the client could not encode it. FAILED at once, with 0 attempts when " +
			"it was never sent; `last_error` names the column and the value.",
		"Fix the row (`UPDATE outbox.events SET ...`) or the writer, then resend; or skip it."},
	{ReasonInvalidTopic,
		"The topic does not exist (the cluster does not create topics), or its name is not one Kafka allows (checked " +
			"before sending). FAILED at once, never sent, 0 attempts.",
		"Create the topic (or fix the writer's topic name), then `outbox-relay resend --failed --reason INVALID_TOPIC`."},
	{ReasonTopicNotAllowed,
		"`--topics` does not allow the topic; or it is a system topic that `--topics` does not name exactly (Kafka's " +
			"internal `__*` such as `__consumer_offsets`, the ecosystem's `_*` such as Schema Registry's `_schemas` and " +
			"Confluent's `_confluent-*`, Kafka Connect's `connect-configs`, `connect-offsets` " +
			"and `connect-status`); or it is the dead-letter topic, which takes events only when `--topics` names it " +
			"exactly. `last_error` names the rule. FAILED at once, never sent, 0 attempts.",
		"If the topic is legitimate, add it to `--topics` and restart the relay, then resend; otherwise find the writer " +
			"and skip the event."},
	{ReasonUnauthorizedOnTopic,
		"The broker refused the relay's principal WRITE on the topic (an ACL). FAILED at once, with the broker's words.",
		"Grant WRITE and DESCRIBE on the topic to the relay's principal ([Kafka ACLs](running.md#kafka-acls)), then resend."},
	{ReasonMessageTooLarge,
		"The record is larger than the broker's, the topic's or `--kafka-max-message-bytes` limit. FAILED at once (a " +
			"broker's refusal is first retried with the message alone, so its batch neighbours are not blamed; 0 attempts " +
			"when `--kafka-max-message-bytes` refused it before sending).",
		"Raise the topic's `max.message.bytes` and `--kafka-max-message-bytes` together, or make the payload smaller, then resend."},
	{ReasonInvalidPartition,
		"A mapped table placed the event on a partition (Debezium's `partition` placement) that its topic does not have. FAILED at once.",
		"Add partitions to the topic or fix the column's value, then resend."},
	{ReasonRetriesExhausted,
		"Another error, for this event alone while the cluster was healthy, came back on every attempt until `attempts` " +
			"reached `max_attempts` (`--retry-max-attempts`, default 5, or the event's own `max_attempts`). Kafka being " +
			"unavailable never counts as an attempt.",
		"Read `last_error`, fix its cause, then resend (attempts start again from 0)."},
}
