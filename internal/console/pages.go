package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

func withRole(ctx context.Context, r role) context.Context {
	return context.WithValue(ctx, roleKey{}, r)
}

func roleFrom(ctx context.Context) role {
	r, _ := ctx.Value(roleKey{}).(role)
	return r
}

// page is what every template gets.
type page struct {
	Title  string
	Prefix string
	Admin  bool   // show actions
	Notice string // the outcome of an action
	// Refresh is how often, in seconds, the page refreshes its live parts
	// (0: never).
	Refresh int
	Data    any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	p := page{Title: title, Prefix: c.cfg.Prefix, Admin: roleFrom(r.Context()) == roleAdmin,
		Notice: r.URL.Query().Get("notice"), Data: data}
	if name == "overview.html" {
		p.Refresh = overviewRefresh
	}
	if err := c.tmpl.ExecuteTemplate(w, name, p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (c *Console) fail(w http.ResponseWriter, err error) {
	http.Error(w, "reading the outbox: "+err.Error(), http.StatusServiceUnavailable)
}

// overviewRefresh is how often the overview refreshes, in seconds.
const overviewRefresh = 5

// overviewData is the overview page's.
type overviewData struct {
	Slots        []store.Slot
	Counts       *store.OverviewCounts
	Statuses     []string
	Failed       []store.ReasonCount
	FailedCapped bool // Failed counts the first FailedBound FAILED rows
	FailedBound  int
	Held         []store.HeldKey
	Relays       []*metrics.RelayState
}

// overviewBound is how many FAILED rows the overview's reasons count.
const overviewBound = 10000

// overview reads only what stays fast on millions of status rows: counts
// bounded or estimated (store.OverviewCounts), FAILED reasons of a bounded
// number of rows, slots and held keys from their indexes.
func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	d, err := c.overviewData(r.Context())
	if err != nil {
		c.fail(w, err)
		return
	}
	c.render(w, r, "overview.html", "Overview", d)
}

func (c *Console) overviewData(ctx context.Context) (d overviewData, err error) {
	d = overviewData{Statuses: store.Statuses(), Relays: c.relays(ctx), FailedBound: overviewBound}
	if d.Slots, err = c.st.Slots(ctx); err != nil {
		return d, err
	}
	if d.Counts, err = c.st.OverviewCounts(ctx, c.cfg.Bounds); err != nil {
		return d, err
	}
	if d.Failed, err = c.st.FailedByReason(ctx, overviewBound); err != nil {
		return d, err
	}
	var failed int64
	for _, f := range d.Failed {
		failed += f.Events
	}
	d.FailedCapped = failed >= overviewBound
	d.Held, err = c.st.HeldKeys(ctx, "", 20)
	return d, err
}

// relayTimeout bounds how long the overview waits for a relay's metrics.
const relayTimeout = time.Second

// relays reads the relays' metrics, all at once, each within relayTimeout.
func (c *Console) relays(ctx context.Context) []*metrics.RelayState {
	out := make([]*metrics.RelayState, len(c.cfg.RelayMetrics))
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, u := range c.cfg.RelayMetrics {
		wg.Go(func() { out[i] = metrics.Scrape(ctx, u) })
	}
	wg.Wait()
	return out
}

// failedPageSize is how many FAILED events a page lists.
const failedPageSize = 50

// failedData is the failed events page's.
type failedData struct {
	Filter store.FailedFilter
	Events []store.Failed
	Count  store.Count // up to overviewBound
	Next   string      // the next page's address; "" when this is the last
	Shown  string      // when the page was made (RFC 3339): "all matching" means as of then
}

func (c *Console) failed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.FailedFilter{Topic: q.Get("topic"), EventType: q.Get("event_type"), Reason: q.Get("reason")}
	after := q.Get("after")
	if after != "" && !uuidText.MatchString(after) {
		http.Error(w, "after: "+errBadID.Error(), http.StatusBadRequest)
		return
	}
	events, err := c.st.FailedPage(r.Context(), f, after, failedPageSize+1)
	if err != nil {
		c.fail(w, err)
		return
	}
	n, err := c.st.CountFailed(r.Context(), f, overviewBound)
	if err != nil {
		c.fail(w, err)
		return
	}
	d := failedData{Filter: f, Events: events, Count: store.Count{N: n, AtLeast: n >= overviewBound}, Shown: c.now().UTC().Format(time.RFC3339Nano)}
	if len(events) > failedPageSize {
		d.Events = events[:failedPageSize]
		next := url.Values{"after": {d.Events[failedPageSize-1].EventID}}
		for k, v := range map[string]string{"topic": f.Topic, "event_type": f.EventType, "reason": f.Reason} {
			if v != "" {
				next.Set(k, v)
			}
		}
		d.Next = c.cfg.Prefix + "/failed?" + next.Encode()
	}
	c.render(w, r, "failed.html", "FAILED events", d)
}

func (c *Console) held(w http.ResponseWriter, r *http.Request) {
	held, err := c.st.HeldKeys(r.Context(), r.URL.Query().Get("topic"), 500)
	if err != nil {
		c.fail(w, err)
		return
	}
	c.render(w, r, "held.html", "Held keys", held)
}

var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// action is resend or skip, on one event, the selected ones, or every
// FAILED event that matches a filter (as the page that asked showed it).
type action struct {
	Name    string // resend or skip
	IDs     []string
	Match   *store.FailedFilter // every matching FAILED event; nil: IDs
	Count   int64               // how many rows it will change, at most
	AtLeast bool                // Count is the bound: more will change
	Confirm url.Values          // the form that confirms it
}

// act shows the confirmation of an action (how many rows it will change)
// or, confirmed, does it. Only rows still FAILED change: a stale page
// changes nothing else.
func (c *Console) act(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, err := c.parseAction(r, name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.PostFormValue("confirm") != "yes" {
			if a.Match != nil {
				if a.Count, err = c.st.CountFailed(r.Context(), *a.Match, overviewBound); err != nil {
					c.fail(w, err)
					return
				}
				a.AtLeast = a.Count >= overviewBound
			}
			c.render(w, r, "confirm.html", "Confirm: "+name, a)
			return
		}
		notice, err := c.do(r.Context(), a)
		if err != nil {
			c.fail(w, err)
			return
		}
		c.back(w, r, notice)
	}
}

// parseAction reads an action's form: ids (one "id", or "sel" checked),
// or match=yes with the filter and the time the page was shown.
func (c *Console) parseAction(r *http.Request, name string) (*action, error) {
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	a := &action{Name: name, Confirm: url.Values{"confirm": {"yes"}}}
	if r.PostForm.Get("match") == "yes" {
		f := store.FailedFilter{Topic: r.PostForm.Get("topic"), EventType: r.PostForm.Get("event_type"), Reason: r.PostForm.Get("reason")}
		if shown := r.PostForm.Get("shown"); shown != "" {
			at, err := time.Parse(time.RFC3339Nano, shown)
			if err != nil {
				return nil, fmt.Errorf("shown: %w", err)
			}
			f.Until = &at // rows that failed after the page was shown are not what it showed
		}
		a.Match = &f
		for _, k := range []string{"match", "topic", "event_type", "reason", "shown"} {
			a.Confirm.Set(k, r.PostForm.Get(k))
		}
		return a, nil
	}
	a.IDs = r.PostForm["sel"]
	if id := r.PostForm.Get("id"); id != "" {
		a.IDs = []string{id}
	}
	if len(a.IDs) == 0 {
		return nil, errors.New("no event chosen")
	}
	for _, id := range a.IDs {
		if !uuidText.MatchString(id) {
			return nil, fmt.Errorf("%q: %w", id, errBadID)
		}
		a.Confirm.Add("sel", id)
	}
	a.Count = int64(len(a.IDs))
	return a, nil
}

// do carries a confirmed action out through the CLI's statements and
// says what it changed.
func (c *Console) do(ctx context.Context, a *action) (string, error) {
	if a.Match != nil {
		var n int64
		var err error
		if a.Name == "resend" {
			n, err = c.st.ResendFailed(ctx, *a.Match)
		} else {
			n, err = c.st.SkipFailed(ctx, *a.Match)
		}
		return fmt.Sprintf("%s: %d FAILED events matching the filter", a.Name, n), err
	}
	done, moved := 0, 0
	for _, id := range a.IDs {
		var ok bool
		var err error
		if a.Name == "resend" {
			ok, _, err = c.st.ResendIfFailed(ctx, id)
		} else {
			ok, _, err = c.st.Skip(ctx, id)
		}
		if err != nil {
			return "", err
		}
		if ok {
			done++
		} else {
			moved++
		}
	}
	notice := fmt.Sprintf("%s: %d events", a.Name, done)
	if moved > 0 {
		notice += fmt.Sprintf("; %d were no longer FAILED and were left as they are", moved)
	}
	return notice, nil
}

// back sends the browser to the failed events page with notice (POST,
// then redirect, then GET: a reload does not repeat the action).
func (c *Console) back(w http.ResponseWriter, r *http.Request, notice string) {
	http.Redirect(w, r, c.cfg.Prefix+"/failed?"+url.Values{"notice": {notice}}.Encode(), http.StatusSeeOther)
}
