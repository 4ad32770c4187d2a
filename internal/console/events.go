package console

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
	// Count is how many rows match, up to listCountBound, when Counted (a
	// status but SENT, or a reason, alone).
	Count   store.Count
	Counted bool
	First   string // the first page's address, when this is not it
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
	if f.Status != "" && !slices.Contains(store.Statuses(), f.Status) {
		err = fmt.Errorf("status %q: not a status (%s)", f.Status, strings.Join(store.Statuses(), ", "))
	} else if f.Reason != "" && !slices.Contains(reasons, f.Reason) {
		err = fmt.Errorf("reason %q: not a failure reason (%s)", f.Reason, strings.Join(reasons, ", "))
	} else if f.Since, err = parseTime("since", d.Since); err == nil {
		f.Until, err = parseTime("until", d.Until)
	}
	before := q.Get("before")
	if err == nil && before != "" && !uuidText.MatchString(before) {
		err = fmt.Errorf("before: %w", errBadID)
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
	n, counted, err := c.st.CountEvents(r.Context(), f, listCountBound)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Count, d.Counted = store.Count{N: n, AtLeast: n >= listCountBound}, counted
	if before != "" {
		first := url.Values{}
		for k, v := range q {
			if k != "before" && k != "lookup" && v[0] != "" {
				first.Set(k, v[0])
			}
		}
		d.First = c.cfg.Prefix + "/events?" + first.Encode()
	}
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

// parseTime reads a filter's time, parameter name: RFC 3339, or "" for
// none.
func parseTime(name, s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("%s %q: times are RFC 3339: 2026-11-26T10:00:00Z", name, s)
	}
	return &t, nil
}

// payloadShown is how much of a payload an event's page shows: past it,
// the page shows the start and links to the whole (a payload of megabytes
// inline makes the page slow to load and to read).
const payloadShown = 64 << 10

// eventData is an event's page.
type eventData struct {
	*store.EventDetail
	ShowPayload bool
	Payload     string // as text, or base64 when it is not UTF-8
	Base64      bool
	Truncated   bool // Payload is its first payloadShown bytes
	Size        int  // the whole payload's, in bytes
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
	d := eventData{EventDetail: ev, ShowPayload: r.URL.Query().Get("payload") == "show", Size: len(ev.Payload)}
	if d.ShowPayload {
		b := ev.Payload
		if len(b) > payloadShown {
			b, d.Truncated = b[:payloadShown], true
			for !utf8.Valid(b) && len(b) > payloadShown-utf8.UTFMax && utf8.Valid(ev.Payload) {
				b = b[:len(b)-1] // cut before a character
			}
		}
		if utf8.Valid(b) {
			d.Payload = string(b)
		} else {
			d.Payload, d.Base64 = base64.StdEncoding.EncodeToString(b), true
		}
	}
	c.render(w, r, "event.html", "Event "+id, d)
}

// payload sends an event's whole payload as a file to download, as
// stored (the page shows at most payloadShown bytes of it).
func (c *Console) payload(w http.ResponseWriter, r *http.Request) {
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
	case !ev.EventKept:
		http.Error(w, "event "+id+": the event itself is gone", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+strings.ToLower(id)+`.payload"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(ev.Payload)))
	_, _ = w.Write(ev.Payload) //nolint:errcheck // the client went away
}
