package console

import (
	"cmp"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/outbox-relay/outbox-relay/internal/store"
)

// eventsPageSize is how many events a page of the event list shows.
const eventsPageSize = 50

// eventsData is the event list's page.
type eventsData struct {
	Filter store.EventFilter
	Since  string // the filter's times as typed
	Until  string
	Events []store.EventRow
	Next   string // the next page's address; "" when this is the last
	// Walked says the page searched as many rows as one may without
	// filling up: Next searches on.
	Walked bool
	Walk   int
}

// events lists status rows by filter, newest first, paged by keyset. A
// lookup of an event id goes to its page; of a key, filters by it.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if look := q.Get("lookup"); look != "" {
		if uuidText.MatchString(look) {
			http.Redirect(w, r, c.cfg.Prefix+"/events/"+look, http.StatusSeeOther)
			return
		}
		q.Set("key", look)
	}
	f := store.EventFilter{Status: q.Get("status"), Topic: q.Get("topic"), Key: q.Get("key"),
		EventType: q.Get("event_type"), Reason: q.Get("reason")}
	d := eventsData{Filter: f, Since: q.Get("since"), Until: q.Get("until")}
	var err error
	if f.Since, err = parseTime(d.Since); err == nil {
		f.Until, err = parseTime(d.Until)
	}
	before := q.Get("before")
	if err == nil && before != "" && !uuidText.MatchString(before) {
		err = errBadID
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p, err := c.st.EventsPage(r.Context(), f, before, eventsPageSize, c.cfg.Walk)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Events, d.Walked, d.Walk = p.Rows, p.Walked, cmp.Or(c.cfg.Walk, store.EventsWalkDefault)
	if p.Before != "" {
		next := url.Values{}
		for k, v := range q {
			if k != "before" && k != "lookup" && v[0] != "" {
				next.Set(k, v[0])
			}
		}
		next.Set("before", p.Before)
		d.Next = c.cfg.Prefix + "/events?" + next.Encode()
	}
	c.render(w, r, "events.html", "Events", d)
}

// parseTime reads a filter's time: RFC 3339, or "" for none.
func parseTime(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, errors.New("times are RFC 3339: 2026-11-26T10:00:00Z")
	}
	return &t, nil
}

// eventData is an event's page.
type eventData struct {
	*store.EventDetail
	ShowPayload bool
	Payload     string // as text, or base64 when it is not UTF-8
	Base64      bool
}

// event shows one event: its status row and what is left of it; the
// payload only when asked for (?payload=show).
func (c *Console) event(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !uuidText.MatchString(id) {
		http.Error(w, errBadID.Error(), http.StatusBadRequest)
		return
	}
	ev, err := c.st.Event(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNoEvent):
		http.Error(w, "event "+id+": "+err.Error(), http.StatusNotFound)
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	d := eventData{EventDetail: ev, ShowPayload: r.URL.Query().Get("payload") == "show"}
	if d.ShowPayload {
		if utf8.Valid(ev.Payload) {
			d.Payload = string(ev.Payload)
		} else {
			d.Payload, d.Base64 = base64.StdEncoding.EncodeToString(ev.Payload), true
		}
	}
	c.render(w, r, "event.html", "Event "+id, d)
}
