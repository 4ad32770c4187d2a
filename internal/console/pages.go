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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
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
	Now     time.Time // when the page was made
	// HoldKeys: keys can be held (--failed-key-policy hold): the held keys
	// are shown.
	HoldKeys bool
	Data     any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	p := page{Title: termsafe.String(title), Prefix: c.cfg.Prefix, Admin: roleFrom(r.Context()) == roleAdmin, Now: c.now(),
		HoldKeys: c.cfg.FailedKeyPolicy == "hold",
		Notice:   notice(r.URL.Query()), Data: data}
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
		return fmt.Sprintf("%s: %s FAILED events matching the filter", did, thousands(n))
	}
	s := fmt.Sprintf("%s: %s events", did, thousands(n))
	if left, err := strconv.ParseInt(q.Get("left"), 10, 64); err == nil && left > 0 {
		s += fmt.Sprintf("; %s were no longer FAILED and were left as they are", thousands(left))
	}
	return s
}

// overviewRefresh is how often the overview refreshes, in seconds.
const overviewRefresh = 5

// overviewData is the overview page's.
type overviewData struct {
	Slots       []store.Slot
	Counts      *store.OverviewCounts
	Statuses    []string
	Failed      []store.ReasonCount // every reason, each counted up to FailedBound
	FailedBound int
	Held        []store.HeldKey // the first ones, in topic and key order
	HeldCount   store.Count
	Relays      []*metrics.RelayState
}

// overviewBound is how many FAILED rows of each reason the overview
// counts, and how many FAILED rows a list page counts: past it, a lower
// bound.
const overviewBound = 10000

// overview reads only what stays fast on millions of status rows: counts
// bounded or estimated (store.OverviewCounts), every FAILED reason counted
// up to a bound, slots and held keys from their indexes.
func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	d, err := c.overviewData(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, "overview.html", "Overview", d)
}

func (c *Console) overviewData(ctx context.Context) (d overviewData, err error) {
	d = overviewData{Statuses: store.Statuses(), FailedBound: overviewBound}
	// Its reads are independent, each bounded: all at once, on the pool's
	// connections, so that the page takes as long as the slowest.
	reads := []func() error{
		func() (err error) { d.Relays = c.relays(ctx); return nil },
		func() (err error) { d.Slots, err = c.st.Slots(ctx); return err },
		func() (err error) { d.Counts, err = c.st.OverviewCounts(ctx, c.cfg.Bounds); return err },
		func() (err error) { d.Failed, err = c.st.FailedByReason(ctx, overviewBound); return err },
	}
	if c.cfg.FailedKeyPolicy == "hold" { // else no key can be held
		reads = append(reads,
			func() (err error) { d.Held, err = c.st.HeldKeysPage(ctx, "", nil, 20, queuedBound); return err },
			func() error {
				n, err := c.st.CountHeldKeys(ctx, "", overviewHeldBound)
				d.HeldCount = store.Count{N: n, AtLeast: n >= overviewHeldBound}
				return err
			})
	}
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Go(func() { errs[i] = read() })
	}
	wg.Wait()
	return d, errors.Join(errs...)
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

// listCountBound is how many rows a list page counts: past it, the page
// says "≥" this many. typeWalk is how many FAILED rows the FAILED list
// reads the event type of, to count those of a type: past it, the count
// is a lower bound too.
const (
	listCountBound = 100000
	typeWalk       = 10000
)

// failedData is the failed events page's.
type failedData struct {
	Filter store.FailedFilter
	Since  string // the filter's failure times as typed
	Until  string
	Oldest bool // oldest failure first (else newest first)
	Events []store.Failed
	Count  store.Count // up to listCountBound
	Walked bool        // Count is of the newest typeWalk FAILED rows (an event type, key or error filter)
	Walk   int
	// Bounded: a search by event type, key or error text was bounded to the newest
	// Walk FAILED events matching the rest of the filter (Since and Until
	// say which); Before is the search of the ones before them.
	Bounded bool
	Before  string
	// Prev and Next are the previous and next pages' addresses; "" at
	// either end. First and Flip are the first page's, in this order and in
	// the other.
	Prev, Next, First, Flip string
	Shown                   string // when the page was made (RFC 3339): "all matching" means as of then
	Back                    string // this page, for an action to come back to
}

// failedFilter reads the FAILED list's filter: 400 for a reason the relay
// never writes.
func failedFilter(q url.Values) (store.FailedFilter, error) {
	f := store.FailedFilter{Topic: q.Get("topic"), EventType: q.Get("event_type"), Reason: q.Get("reason"),
		Key: q.Get("key"), ErrorContains: q.Get("error_contains")}
	if f.Reason != "" && !slices.Contains(reasons, f.Reason) {
		return f, fmt.Errorf("reason %q: not a failure reason (%s)", f.Reason, strings.Join(reasons, ", "))
	}
	var err error
	if f.Since, err = parseTime("since", q.Get("since")); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", q.Get("until")); err != nil {
		return f, err
	}
	if f.Since != nil && f.Until != nil && f.Until.Before(*f.Since) {
		return f, fmt.Errorf("until %q: before since %q", q.Get("until"), q.Get("since"))
	}
	return f, nil
}

// search bounds a search by event type, key or error text (no index of
// the FAILED rows reads them: each row's is read) to the newest typeWalk
// FAILED events matching the rest of f: past that many, it
// raises f's since to the failure time of the last of them and fixes its
// until (the page's time, if it had none), so that the list, its count, its
// other pages and the actions on all matching read the same rows. It says
// whether it did.
func (c *Console) search(ctx context.Context, f *store.FailedFilter, shown time.Time) (bool, error) {
	if f.EventType == "" && f.Key == "" && f.ErrorContains == "" {
		return false, nil
	}
	floor, err := c.st.SearchFloor(ctx, *f, typeWalk)
	if err != nil || floor == nil {
		return false, err
	}
	f.Since = floor
	if f.Until == nil {
		f.Until = &shown
	}
	return true, nil
}

// reasons are the failure reasons the relay writes.
var reasons = []string{kafka.ReasonInvalidTopic, kafka.ReasonUnauthorizedOnTopic, kafka.ReasonMessageTooLarge,
	kafka.ReasonInvalidPartition, kafka.ReasonInvalidEvent, kafka.ReasonTopicNotAllowed, store.ReasonRetriesExhausted}

// failed lists FAILED events a page at a time, newest failure first
// (order=oldest: oldest first), with the number that match. A page starts
// after a place in that order (after=), or ends before one (before=: the
// previous page): a place, not an event, so paging goes on whatever
// became of the events at either end.
func (c *Console) failed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, after, before, err := failedQuery(q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := c.now().UTC()
	d := failedData{Since: q.Get("since"), Until: q.Get("until"), Oldest: q.Get("order") == "oldest", Walk: typeWalk, Shown: now.Format(time.RFC3339Nano)}
	ctx := r.Context()
	if d.Bounded, err = c.search(ctx, &f, now); err != nil {
		c.fail(w, r, err)
		return
	}
	if d.Bounded {
		d.Since, d.Until = f.Since.UTC().Format(time.RFC3339Nano), f.Until.UTC().Format(time.RFC3339Nano)
		d.Before = c.failedLink(f, d.Oldest, "until", d.Since, "since", q.Get("since")) // and the since asked for, if any
	}
	d.Filter = f
	events, more, behind, err := c.failedPage(ctx, f, after, before, !d.Oldest)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Events = events
	walk := typeWalk
	if d.Bounded { // the search's window: typeWalk rows, and any that failed at the same time as its oldest
		walk = listCountBound
	}
	n, walked, err := c.st.CountFailed(ctx, f, listCountBound, walk)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	// A bounded search counts exactly among the rows it read; older ones
	// may match too.
	d.Count, d.Walked = store.Count{N: n, AtLeast: n >= listCountBound || walked || d.Bounded}, walked && !d.Bounded
	c.failedLinks(&d, more, behind)
	d.Back = backOf(r)
	c.render(w, r, "failed.html", "FAILED events", d)
}

// failedQuery reads the FAILED list's filter, the places its page starts
// after or ends before, and its order: an error (a 400) for any that is not
// one.
func failedQuery(q url.Values) (f store.FailedFilter, after, before *store.FailedCursor, err error) {
	f, err = failedFilter(q)
	for _, p := range []struct {
		name string
		to   **store.FailedCursor
	}{{"after", &after}, {"before", &before}} {
		if v := q.Get(p.name); v != "" && err == nil {
			cur, placed, perr := store.ParseFailedCursor(v)
			if perr == nil && !placed {
				perr = store.ErrBadCursor
			}
			err = errorsJoinParam(p.name, perr)
			*p.to = &cur
		}
	}
	order := q.Get("order")
	if err == nil && order != "" && order != "oldest" && order != "newest" {
		err = fmt.Errorf("order %q: newest or oldest", order)
	}
	return f, after, before, err
}

// failedPage reads one page of FAILED events in the page's order (newest
// failure first, or oldest), after a place or before one (the previous
// page), and says whether there is a page past it (more) and one before it
// (behind).
func (c *Console) failedPage(ctx context.Context, f store.FailedFilter, after, before *store.FailedCursor, newest bool) (events []store.Failed, more, behind bool, err error) {
	switch {
	case before != nil: // the previous page: read backwards from its place
		events, err = c.st.FailedPage(ctx, f, before, !newest, failedPageSize+1)
		if err != nil {
			return nil, false, false, err
		}
		behind = len(events) > failedPageSize
		events = events[:min(len(events), failedPageSize)]
		slices.Reverse(events)
		more = true
	default:
		events, err = c.st.FailedPage(ctx, f, after, newest, failedPageSize+1)
		if err != nil {
			return nil, false, false, err
		}
		more = len(events) > failedPageSize
		events = events[:min(len(events), failedPageSize)]
		behind = after != nil
	}
	if len(events) > 0 { // is there anything either side, really?
		if err := c.failedSides(ctx, f, events, newest, &more, &behind); err != nil {
			return nil, false, false, err
		}
	}
	return events, more, behind, nil
}

// failedSides checks that a page said to have a page past it (more) or
// before it (behind) really has: at least one event beyond its last or
// before its first. events is not empty.
func (c *Console) failedSides(ctx context.Context, f store.FailedFilter, events []store.Failed, newest bool, more, behind *bool) error {
	for _, side := range []struct {
		is   *bool
		from store.FailedCursor
		way  bool
	}{{behind, events[0].Cursor(), !newest}, {more, events[len(events)-1].Cursor(), newest}} {
		if *side.is {
			one, err := c.st.FailedPage(ctx, f, &side.from, side.way, 1)
			if err != nil {
				return err
			}
			*side.is = len(one) > 0
		}
	}
	return nil
}

// failedLinks sets the addresses of d's first page (in this order and in the
// other) and of the next and previous pages, if there are any, keeping the
// filter q asked for.
func (c *Console) failedLinks(d *failedData, more, behind bool) {
	f := d.Filter
	d.First, d.Flip = c.failedLink(f, d.Oldest), c.failedLink(f, !d.Oldest)
	if more {
		d.Next = c.failedLink(f, d.Oldest, "after", d.Events[len(d.Events)-1].Cursor().String())
	}
	if behind {
		d.Prev = c.failedLink(f, d.Oldest, "before", d.Events[0].Cursor().String())
	}
}

// failedLink is the address of the FAILED list with filter f, oldest first
// or not, and the parameters of set (name, value, ...; "" removes one).
func (c *Console) failedLink(f store.FailedFilter, oldest bool, set ...string) string {
	v := url.Values{}
	for k, s := range map[string]string{"topic": f.Topic, "event_type": f.EventType, "reason": f.Reason, "key": f.Key,
		"error_contains": f.ErrorContains} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if oldest {
		v.Set("order", "oldest")
	}
	for k, t := range map[string]*time.Time{"since": f.Since, "until": f.Until} {
		if t != nil {
			v.Set(k, t.UTC().Format(time.RFC3339Nano))
		}
	}
	for i := 0; i+1 < len(set); i += 2 {
		if set[i+1] == "" {
			v.Del(set[i])
		} else {
			v.Set(set[i], set[i+1])
		}
	}
	if len(v) == 0 {
		return c.cfg.Prefix + "/failed"
	}
	return c.cfg.Prefix + "/failed?" + v.Encode()
}

// errorsJoinParam names the parameter an error is about (nil: nil).
func errorsJoinParam(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// backOf is the page r asked for, without the notice of an action, for an
// action to come back to.
func backOf(r *http.Request) string {
	q := r.URL.Query()
	for _, k := range []string{"did", "n", "left", "match", "warn"} {
		q.Del(k)
	}
	if len(q) == 0 {
		return r.URL.Path
	}
	return r.URL.Path + "?" + q.Encode()
}

// Held keys: a page lists heldPageSize, and counts up to heldCountBound
// (the overview up to overviewHeldBound): past it, a lower bound.
const (
	heldPageSize      = 50
	heldCountBound    = 10000
	overviewHeldBound = 1000
	queuedBound       = 10000
)

// heldData is the held keys page's.
type heldData struct {
	Topic string
	Keys  []store.HeldKey
	Count store.Count
	// Next is the next page's address ("" on the last); First the first
	// page's when this is not it.
	Next, First string
}

// held lists the held keys a page at a time, in topic and key order, with
// how many there are.
func (c *Console) held(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := heldData{Topic: q.Get("topic")}
	var after *store.HeldCursor
	if q.Has("after_topic") {
		after = &store.HeldCursor{Topic: q.Get("after_topic"), Key: q.Get("after_key")}
	}
	keys, err := c.st.HeldKeysPage(r.Context(), d.Topic, after, heldPageSize+1, queuedBound)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	n, err := c.st.CountHeldKeys(r.Context(), d.Topic, heldCountBound)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Count = store.Count{N: n, AtLeast: n >= heldCountBound}
	d.Keys = keys[:min(len(keys), heldPageSize)]
	link := url.Values{}
	if d.Topic != "" {
		link.Set("topic", d.Topic)
	}
	if after != nil {
		d.First = c.cfg.Prefix + "/held?" + link.Encode()
	}
	if len(keys) > heldPageSize {
		last := d.Keys[len(d.Keys)-1]
		link.Set("after_topic", last.Topic)
		link.Set("after_key", last.Key)
		d.Next = c.cfg.Prefix + "/held?" + link.Encode()
	}
	c.render(w, r, "held.html", "Held keys", d)
}

// topicsData is the topics page's.
type topicsData struct {
	Statuses []string
	Topics   []topicRow
	Bound    int // PENDING rows read a topic for its oldest
}

// topicRow is a topic's line: its counts (as the overview's) and details.
type topicRow struct {
	store.TopicCounts
	store.TopicDetail
	PendingAtLeast bool // the oldest PENDING is of the first Bound read
	// LastHour is the events the relays recorded SENT and FAILED in the
	// last hour (outbox.delivery_minutes). Folded: it has no counts of its
	// own there while (other) or (refused) have some, which may be its.
	LastHour store.MinuteCount
	Folded   []string
}

// topics shows each topic with rows: counts by status (as the overview
// counts them), its newest failure, its oldest PENDING event.
func (c *Console) topics(w http.ResponseWriter, r *http.Request) {
	counts, err := c.st.OverviewCounts(r.Context(), c.cfg.Bounds)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := topicsData{Statuses: store.Statuses(), Bound: overviewBound}
	var names []string
	for _, t := range counts.Topics {
		names = append(names, t.Topic)
	}
	details, err := c.st.TopicDetails(r.Context(), names, overviewBound)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	byTopic := map[string]store.TopicDetail{}
	for _, x := range details {
		byTopic[x.Topic] = x
	}
	hour, err := c.st.DeliveryTopics(r.Context(), c.now().UTC().Truncate(time.Minute).Add(-59*time.Minute))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	lastHour := map[string]store.MinuteCount{}
	for _, x := range hour {
		lastHour[x.Topic] = x
	}
	var folded []string // the labels of many topics that have counts
	for _, label := range []string{metrics.TopicOther, metrics.TopicRefused} {
		if _, ok := lastHour[label]; ok {
			folded = append(folded, label)
		}
	}
	for _, t := range counts.Topics {
		x := byTopic[t.Topic]
		row := topicRow{TopicCounts: t, TopicDetail: x, PendingAtLeast: x.PendingRead >= int64(overviewBound)}
		if h, ok := lastHour[t.Topic]; ok {
			row.LastHour = h
		} else {
			row.Folded = folded
		}
		d.Topics = append(d.Topics, row)
	}
	c.render(w, r, "topics.html", "Topics", d)
}

// keyShown is how many of a key's unfinished events its page lists.
const keyShown = 200

// keyData is a key's page.
type keyData struct {
	Topic, Key string
	Queue      []store.EventRow // its unfinished events in delivery order
	More       bool             // more than keyShown
	Held       bool             // the first one holds the others
	Events     string           // the address of all its events, newest first
}

// key shows a key: its unfinished events in the order the relay delivers
// them, the first one (when FAILED or waiting for a retry, under hold) the
// one that blocks the others; and a link to all its events.
func (c *Console) key(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := keyData{Topic: q.Get("topic"), Key: q.Get("key")}
	if d.Topic == "" || d.Key == "" {
		http.Error(w, "topic and key: both are needed", http.StatusBadRequest)
		return
	}
	queue, err := c.st.KeyQueue(r.Context(), d.Topic, d.Key, keyShown+1)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Queue, d.More = queue[:min(len(queue), keyShown)], len(queue) > keyShown
	d.Held = c.cfg.FailedKeyPolicy == "hold" && len(d.Queue) > 0 && (d.Queue[0].Status == "FAILED" || d.Queue[0].Attempts > 0)
	d.Events = c.cfg.Prefix + "/events?" + url.Values{"key": {d.Key}, "topic": {d.Topic}}.Encode()
	c.render(w, r, "key.html", "Key "+d.Key, d)
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
	Name  string // resend or skip
	IDs   []string
	Match *store.FailedFilter // every matching FAILED event; nil: IDs
	Count int64               // how many rows it would change now, counted when asked
	Words string              // what it acts on, in words
	// Invalid is how many of them failed with INVALID_EVENT (a resend's):
	// the event itself was refused, so a resend fails again unless the
	// event or the relay's configuration changed since.
	Invalid int64
	Back    string     // the page it came from (prefix-less), to go back to
	Confirm url.Values // the form that confirms it
}

// act shows the confirmation of an action (what it acts on, and how many
// rows it would change, counted then) or, confirmed, does it. Only rows
// still FAILED and matching change: a stale page changes nothing else.
func (c *Console) act(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, err := c.parseAction(r, name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.PostFormValue("confirm") != "yes" {
			if a.Match != nil {
				err = c.boundMatch(r.Context(), a)
			}
			if err != nil {
				c.fail(w, r, err)
				return
			}
			if a.Match != nil {
				a.Count, _, err = c.st.CountFailed(r.Context(), *a.Match, 0, 0)
			} else {
				a.Count, err = c.st.CountFailedIDs(r.Context(), a.IDs, "")
			}
			if err == nil && name == "resend" {
				a.Invalid, err = c.invalidAmong(r.Context(), a)
			}
			if err != nil {
				c.fail(w, r, err)
				return
			}
			c.render(w, r, "confirm.html", "Confirm: "+name, a)
			return
		}
		d, errorID := c.do(r, a)
		if errorID != "" {
			showError(w, errorID)
			return
		}
		c.back(w, r, d, a.Back)
	}
}

// boundMatch bounds the confirmation of an action on every FAILED event
// matching a search by event type, key or error text as the FAILED list
// bounds the search (Console.search: the newest typeWalk that match the
// other filters), so that counting them reads no more rows than the list
// did; the bound becomes the filter the confirmed action sends, and its
// words. From the list's page it changes nothing: its form sends the
// bound the list searched.
func (c *Console) boundMatch(ctx context.Context, a *action) error {
	bounded, err := c.search(ctx, a.Match, c.now().UTC())
	if err != nil || !bounded {
		return err
	}
	a.Confirm.Set("since", a.Match.Since.UTC().Format(time.RFC3339Nano))
	a.Confirm.Set("until", a.Match.Until.UTC().Format(time.RFC3339Nano))
	a.Words = filterWords(*a.Match)
	return nil
}

// invalidAmong counts the rows of a resend that failed with INVALID_EVENT.
func (c *Console) invalidAmong(ctx context.Context, a *action) (int64, error) {
	if a.Match == nil {
		return c.st.CountFailedIDs(ctx, a.IDs, kafka.ReasonInvalidEvent)
	}
	if a.Match.Reason != "" && a.Match.Reason != kafka.ReasonInvalidEvent {
		return 0, nil
	}
	f := *a.Match
	f.Reason = kafka.ReasonInvalidEvent
	n, _, err := c.st.CountFailed(ctx, f, 0, 0)
	return n, err
}

// backTo is where an action goes back to: the console's page back names
// (the FAILED list with its filter, or an event's page), else the FAILED
// list.
func backTo(back string) string {
	u, err := url.Parse(back)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Fragment != "" ||
		!(u.Path == "/failed" || strings.HasPrefix(u.Path, "/events/") && uuidText.MatchString(strings.TrimPrefix(u.Path, "/events/"))) {
		return "/failed"
	}
	return u.Path + "?" + u.Query().Encode()
}

// parseAction reads an action's form: ids (one "id", or "sel" checked),
// or match=yes with the filter and the time the page was shown; and the
// page to go back to.
func (c *Console) parseAction(r *http.Request, name string) (*action, error) {
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	a := &action{Name: name, Back: backTo(r.PostForm.Get("back")), Confirm: url.Values{"confirm": {"yes"}}}
	a.Confirm.Set("back", a.Back)
	if r.PostForm.Get("match") == "yes" {
		f, err := failedFilter(r.PostForm)
		if err != nil {
			return nil, err
		}
		if shown := r.PostForm.Get("shown"); shown != "" {
			at, err := time.Parse(time.RFC3339Nano, shown)
			if err != nil {
				return nil, fmt.Errorf("shown: %w", err)
			}
			if f.Until == nil || at.Before(*f.Until) {
				f.Until = &at // rows that failed after the page was shown are not what it showed
			}
		}
		a.Match = &f
		for _, k := range []string{"match", "topic", "event_type", "reason", "key", "error_contains", "since", "until", "shown"} {
			a.Confirm.Set(k, r.PostForm.Get(k))
		}
		a.Words = filterWords(f)
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
	a.Words = "the FAILED event " + a.IDs[0]
	if len(a.IDs) > 1 {
		a.Words = "the " + thousands(int64(len(a.IDs))) + " selected events that are still FAILED"
	}
	return a, nil
}

// filterWords says in words which FAILED events f selects.
func filterWords(f store.FailedFilter) string {
	w := "every FAILED event"
	if f.Topic != "" {
		w += " of topic " + strconv.Quote(f.Topic)
	}
	if f.EventType != "" {
		w += " of event type " + strconv.Quote(f.EventType)
	}
	if f.Key != "" {
		w += " of key " + strconv.Quote(f.Key)
	}
	if f.Reason != "" {
		w += " that failed with reason " + f.Reason
	}
	if f.ErrorContains != "" {
		w += " whose last error contains " + strconv.Quote(f.ErrorContains)
	}
	if f.Since != nil {
		w += " that failed at or after " + f.Since.UTC().Format("2006-01-02 15:04:05.000") + " UTC"
	}
	if f.Until != nil {
		w += " and failed before " + f.Until.UTC().Format("2006-01-02 15:04:05.000") + " UTC (at the latest when the list was shown)"
	}
	if f.Topic == "" && f.EventType == "" && f.Reason == "" && f.Key == "" && f.ErrorContains == "" {
		w += ", of every topic, type and reason"
	}
	return w
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
		for k, s := range map[string]string{"topic": f.Topic, "event_type": f.EventType, "reason": f.Reason, "key": f.Key,
			"error_contains": f.ErrorContains} {
			if s != "" {
				m[k] = s
			}
		}
		if f.Since != nil {
			m["since"] = f.Since.UTC().Format(time.RFC3339Nano)
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

// back sends the browser back to the page the action came from with what
// it did (POST, then redirect, then GET: a reload does not repeat the
// action).
func (c *Console) back(w http.ResponseWriter, r *http.Request, d done, to string) {
	u, _ := url.Parse(to) //nolint:errcheck // backTo made it
	q := u.Query()
	q.Set("did", d.Name)
	q.Set("n", strconv.FormatInt(d.Rows, 10))
	if d.Match {
		q.Set("match", "yes")
	}
	if d.Left > 0 {
		q.Set("left", strconv.Itoa(d.Left))
	}
	http.Redirect(w, r, c.cfg.Prefix+u.Path+"?"+q.Encode(), http.StatusSeeOther)
}
