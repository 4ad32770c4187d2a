package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

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
	p := page{Title: title, Prefix: c.cfg.Prefix, Admin: roleFrom(r.Context()) == roleAdmin,
		Notice: notice(r.URL.Query()), Data: data}
	if name == "overview.html" {
		p.Refresh = overviewRefresh
	}
	var b bytes.Buffer // the whole page, or an error instead of half of one
	if err := c.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		c.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = b.WriteTo(w) //nolint:errcheck // the client went away
}

// fail answers a request the database (or a template) failed with a short
// message and an error id; the details go to the log, under that id.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	showError(w, c.logError(r, err))
}

// logError logs err, which failed request r, and returns its error id.
func (c *Console) logError(r *http.Request, err error) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) //nolint:errcheck // never fails
	id := hex.EncodeToString(b[:])
	level := zap.ErrorLevel
	if errors.Is(err, context.Canceled) {
		level = zap.DebugLevel // the browser went away
	}
	c.log.Log(level, "console: a request failed", zap.String("error_id", id), zap.String("method", r.Method),
		zap.String("path", r.URL.Path), zap.String("remote_addr", r.RemoteAddr), zap.Error(err))
	return id
}

// showError tells the browser that its request failed, and the error id
// to look for in the console's log; never the database's words (its
// statements, tables, values).
func showError(w http.ResponseWriter, id string) {
	http.Error(w, "The outbox's database could not answer (error id "+id+"); the console's log has the details.",
		http.StatusServiceUnavailable)
}

// notice is the outcome of an action, made from the parameters back sends
// (did, n, left, match), never from text in the address: a link cannot
// make the console say something else.
func notice(q url.Values) string {
	did := q.Get("did")
	n, err := strconv.ParseInt(q.Get("n"), 10, 64)
	if (did != "resend" && did != "skip") || err != nil || n < 0 {
		return ""
	}
	if q.Get("match") == "yes" {
		return fmt.Sprintf("%s: %d FAILED events matching the filter", did, n)
	}
	s := fmt.Sprintf("%s: %d events", did, n)
	if left, err := strconv.ParseInt(q.Get("left"), 10, 64); err == nil && left > 0 {
		s += fmt.Sprintf("; %d were no longer FAILED and were left as they are", left)
	}
	return s
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
		c.fail(w, r, err)
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
		c.fail(w, r, err)
		return
	}
	n, err := c.st.CountFailed(r.Context(), f, overviewBound)
	if err != nil {
		c.fail(w, r, err)
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
		c.fail(w, r, err)
		return
	}
	c.render(w, r, "held.html", "Held keys", held)
}

// actionsShown is how many actions the actions page lists.
const actionsShown = 200

// actions lists the console's last actions (outbox.console_actions).
func (c *Console) actions(w http.ResponseWriter, r *http.Request) {
	list, err := c.st.ConsoleActions(r.Context(), actionsShown)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, "actions.html", "Actions", list)
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
					c.fail(w, r, err)
					return
				}
				a.AtLeast = a.Count >= overviewBound
			}
			c.render(w, r, "confirm.html", "Confirm: "+name, a)
			return
		}
		d, errorID := c.do(r, a)
		if errorID != "" {
			showError(w, errorID)
			return
		}
		c.back(w, r, d)
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

// done is what an action changed.
type done struct {
	Name  string
	Rows  int64 // rows changed
	Left  int   // selected events no longer FAILED, left as they were
	Match bool  // every FAILED event matching a filter
}

// do carries a confirmed action out through the CLI's statements, and
// logs it (outbox.console_actions and the console's log) in the same
// transaction: an action that cannot be logged is not done. A failed one
// changes nothing, and is logged with the error id it returns.
func (c *Console) do(r *http.Request, a *action) (d done, errorID string) {
	ctx := r.Context()
	entry := store.ConsoleAction{TokenRole: c.tokenRole(r), RemoteAddr: r.RemoteAddr, Action: a.Name, Filter: a.filter()}
	err := c.st.InTx(ctx, func(tx *store.Store) error {
		var err error
		if d, err = apply(ctx, tx, a); err != nil {
			return err
		}
		entry.RowsChanged = d.Rows
		return tx.LogConsoleAction(ctx, entry)
	})
	fields := []zap.Field{zap.String("token_role", entry.TokenRole), zap.String("remote_addr", entry.RemoteAddr),
		zap.String("action", entry.Action), zap.ByteString("filter", entry.Filter)}
	if err != nil {
		entry.RowsChanged, entry.ErrorID = 0, c.logError(r, err)
		c.log.Warn("console action", append(fields, zap.Int64("rows_changed", 0), zap.String("error_id", entry.ErrorID))...)
		if lerr := c.st.LogConsoleAction(context.WithoutCancel(ctx), entry); lerr != nil {
			c.log.Error("console: logging a failed action", zap.String("error_id", entry.ErrorID), zap.Error(lerr))
		}
		return d, entry.ErrorID
	}
	c.log.Info("console action", append(fields, zap.Int64("rows_changed", d.Rows))...)
	return d, ""
}

// apply carries a out on st.
func apply(ctx context.Context, st *store.Store, a *action) (done, error) {
	d := done{Name: a.Name, Match: a.Match != nil}
	if a.Match != nil {
		var err error
		if a.Name == "resend" {
			d.Rows, err = st.ResendFailed(ctx, *a.Match)
		} else {
			d.Rows, err = st.SkipFailed(ctx, *a.Match)
		}
		return d, err
	}
	for _, id := range a.IDs {
		var ok bool
		var err error
		if a.Name == "resend" {
			ok, _, err = st.ResendIfFailed(ctx, id)
		} else {
			ok, _, err = st.Skip(ctx, id)
		}
		if err != nil {
			return d, err
		}
		if ok {
			d.Rows++
		} else {
			d.Left++
		}
	}
	return d, nil
}

// filter is what the action log keeps of a's choice: its event ids, or
// the filter of every matching FAILED event (the fields given).
func (a *action) filter() []byte {
	var v any = map[string][]string{"event_ids": a.IDs}
	if f := a.Match; f != nil {
		m := map[string]string{}
		for k, s := range map[string]string{"topic": f.Topic, "event_type": f.EventType, "reason": f.Reason} {
			if s != "" {
				m[k] = s
			}
		}
		if f.Until != nil {
			m["until"] = f.Until.UTC().Format(time.RFC3339Nano)
		}
		v = m
	}
	b, _ := json.Marshal(v) //nolint:errcheck // strings only
	return b
}

// tokenRole is how the action log names the token of r: admin, read, or
// none (the console has no token).
func (c *Console) tokenRole(r *http.Request) string {
	switch {
	case c.cfg.ReadToken == "" && c.cfg.AdminToken == "":
		return "none"
	case roleFrom(r.Context()) == roleAdmin:
		return "admin"
	}
	return "read"
}

// back sends the browser to the failed events page with what the action
// did (POST, then redirect, then GET: a reload does not repeat the action).
func (c *Console) back(w http.ResponseWriter, r *http.Request, d done) {
	q := url.Values{"did": {d.Name}, "n": {strconv.FormatInt(d.Rows, 10)}}
	if d.Match {
		q.Set("match", "yes")
	}
	if d.Left > 0 {
		q.Set("left", strconv.Itoa(d.Left))
	}
	http.Redirect(w, r, c.cfg.Prefix+"/failed?"+q.Encode(), http.StatusSeeOther)
}
