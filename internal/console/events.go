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
	// Oldest: oldest first (else newest first). First is the first page's
	// address when this is not it, Prev the previous page's, Flip the first
	// page's in the other order.
	Oldest            bool
	First, Prev, Flip string
}

// events lists status rows by filter, newest first (order=oldest: oldest
// first), paged by keyset both ways. A lookup of an event id goes to its
// page; of a key, filters by it.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if look := q.Get("lookup"); look != "" {
		if uuidText.MatchString(look) {
			http.Redirect(w, r, c.cfg.Prefix+"/events/"+look, http.StatusSeeOther)
			return
		}
		q.Set("key", look)
	}
	f, err := eventsFilter(q)
	var from string
	var asc bool
	if err == nil {
		from, asc, err = eventsPlace(q)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d := eventsData{Filter: f, Since: q.Get("since"), Until: q.Get("until"), Oldest: q.Get("order") == "oldest"}
	p, err := c.st.EventsPage(r.Context(), f, from, asc, eventsPageSize, c.cfg.Walk)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	back := asc != d.Oldest // a previous page
	if back {
		slices.Reverse(p.Rows)
	}
	d.Events, d.Walked, d.Walk = p.Rows, p.Walked, cmp.Or(c.cfg.Walk, store.EventsWalkDefault)
	n, counted, err := c.st.CountEvents(r.Context(), f, listCountBound)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Count, d.Counted = store.Count{N: n, AtLeast: n >= listCountBound}, counted
	c.eventsLinks(&d, q, p, from, back)
	c.render(w, r, "events.html", "Events", d)
}

// eventsFilter reads the event list's filter: an error (a 400) for a status
// that is not one, a reason the relay never writes, or a time that is not
// RFC 3339.
func eventsFilter(q url.Values) (store.EventFilter, error) {
	f := store.EventFilter{Status: q.Get("status"), Topic: q.Get("topic"), Key: q.Get("key"),
		EventType: q.Get("event_type"), Reason: q.Get("reason")}
	var err error
	if f.Status != "" && !slices.Contains(store.Statuses(), f.Status) {
		err = fmt.Errorf("status %q: not a status (%s)", f.Status, strings.Join(store.Statuses(), ", "))
	} else if f.Reason != "" && !slices.Contains(reasons, f.Reason) {
		err = fmt.Errorf("reason %q: not a failure reason (%s)", f.Reason, strings.Join(reasons, ", "))
	} else if f.Since, err = parseTime("since", q.Get("since")); err == nil {
		f.Until, err = parseTime("until", q.Get("until"))
	}
	return f, err
}

// eventsPlace reads where the event list's page starts (from: an event id,
// "" for the first page) and which way it is read (asc: oldest first). A
// page starts before an event (newest first) or after one (oldest first);
// the other way round from the display's order, it is the previous page,
// read backwards. An error (a 400) for an order that is not one, both
// places, or a place that is not an event id.
func eventsPlace(q url.Values) (from string, asc bool, err error) {
	order := q.Get("order")
	if order != "" && order != "newest" && order != "oldest" {
		return "", false, fmt.Errorf("order %q: newest or oldest", order)
	}
	from, asc = q.Get("before"), order == "oldest" && q.Get("before") == "" // the first page: in the display's order
	if q.Get("after") != "" {
		if q.Get("before") != "" {
			return "", false, errors.New("before and after: one or the other")
		}
		from, asc = q.Get("after"), true
	}
	if from != "" && !uuidText.MatchString(from) {
		return "", false, fmt.Errorf("before or after: %w", errBadID)
	}
	return from, asc, nil
}

// eventsLinks sets the addresses of d's first page (when this is not it, and
// in the other order), of the next page and of the previous one, keeping the
// filter q asked for. p is the page read from from; back says it was read
// backwards (a previous page).
func (c *Console) eventsLinks(d *eventsData, q url.Values, p *store.EventsPage, from string, back bool) {
	inOrder := func(oldest bool, set ...string) string {
		v := url.Values{}
		for k, vs := range q {
			if k != "before" && k != "after" && k != "lookup" && k != "order" && vs[0] != "" {
				v.Set(k, vs[0])
			}
		}
		if oldest {
			v.Set("order", "oldest")
		}
		for i := 0; i+1 < len(set); i += 2 {
			v.Set(set[i], set[i+1])
		}
		return c.cfg.Prefix + "/events?" + v.Encode()
	}
	link := func(set ...string) string { return inOrder(d.Oldest, set...) }
	nextParam, prevParam := "before", "after"
	if d.Oldest {
		nextParam, prevParam = "after", "before"
	}
	if from != "" {
		d.First = link()
	}
	d.Flip = inOrder(!d.Oldest)
	switch {
	case !back:
		if p.Before != "" {
			d.Next = link(nextParam, p.Before)
		}
		if from != "" && len(d.Events) > 0 {
			d.Prev = link(prevParam, d.Events[0].EventID)
		}
	default:
		if len(d.Events) > 0 {
			d.Next = link(nextParam, d.Events[len(d.Events)-1].EventID)
		}
		if p.Before != "" {
			d.Prev = link(prevParam, p.Before)
		}
		d.Walked = false // a previous page's walk: its link searches on
	}
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
	Failures    []store.Attempt // its failed attempts, newest first
	Kept        int             // how many an event keeps
	ShowPayload bool
	Payload     string // as text, or base64 when it is not UTF-8
	Base64      bool
	Truncated   bool // Payload is its first payloadShown bytes
	Size        int  // the whole payload's, in bytes
}

// lookup reads the event the path names; nil when it answered instead
// (400 for an id that is not a uuid, 404 for no such event, or the
// database's failure).
func (c *Console) lookup(w http.ResponseWriter, r *http.Request) (string, *store.EventDetail) {
	id := r.PathValue("id")
	if !uuidText.MatchString(id) {
		http.Error(w, errBadID.Error(), http.StatusBadRequest)
		return id, nil
	}
	ev, err := c.st.Event(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNoEvent):
		http.Error(w, "event "+id+": "+err.Error(), http.StatusNotFound)
		return id, nil
	case err != nil:
		c.fail(w, r, err)
		return id, nil
	}
	return id, ev
}

// event shows one event: its status row and what is left of it; the
// payload only when asked for (?payload=show).
func (c *Console) event(w http.ResponseWriter, r *http.Request) {
	id, ev := c.lookup(w, r)
	if ev == nil {
		return
	}
	d := eventData{EventDetail: ev, ShowPayload: r.URL.Query().Get("payload") == "show", Size: len(ev.Payload),
		Kept: store.AttemptsKept}
	var err error
	if d.Failures, err = c.st.Attempts(r.Context(), id); err != nil {
		c.fail(w, r, err)
		return
	}
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
	id, ev := c.lookup(w, r)
	switch {
	case ev == nil:
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
