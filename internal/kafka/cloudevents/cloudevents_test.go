package cloudevents_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
)

// The default source is a valid URI-reference whatever the database's
// and the table's names hold, as the CloudEvents Go SDK checks it.
func TestDefaultSource_IsAURIReferenceTheSDKAcceptsForAnyName(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"orders_db", "shop db", "ünïcode", "a/b?c#d%e", `q"<>\^{|}`} {
		src := cloudevents.DefaultSource(db, "outbox.events")
		if err := cloudevents.CheckSource(src); err != nil {
			t.Errorf("database %q: source %q: %v", db, src, err)
		}
		ev := event.New()
		ev.SetID("1")
		ev.SetType("t")
		ev.SetTime(time.Now())
		ev.SetSource(src)
		if err := ev.Validate(); err != nil {
			t.Errorf("database %q: the SDK refuses source %q: %v", db, src, err)
		}
		if strings.Count(src, "/") != 2 {
			t.Errorf("database %q: source %q: a / in the name was not encoded", db, src)
		}
	}
	if got := cloudevents.DefaultSource("shop db", "outbox.events"); got != "/shop%20db/outbox.events" {
		t.Errorf("DefaultSource(shop db) = %q", got)
	}
}

// --cloudevents-source is checked at start: a URI-reference, nothing else.
func TestConfig_RefusesASourceThatIsNotAURIReference(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"/shop db/orders", "https://example.com/a\nb", "%zz", "/a\x00"} {
		c := cloudevents.Config{Mode: cloudevents.Binary, Source: src}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--cloudevents-source") {
			t.Errorf("source %q: %v, want refused naming --cloudevents-source", src, err)
		}
	}
	for _, src := range []string{"https://example.com/orders", "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", "/orders_db/outbox.events", "orders"} {
		c := cloudevents.Config{Mode: cloudevents.Structured, Source: src}
		if err := c.Validate(); err != nil {
			t.Errorf("source %q refused: %v", src, err)
		}
	}
}
