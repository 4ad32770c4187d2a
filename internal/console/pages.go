package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"

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
	Data   any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	p := page{Title: title, Prefix: c.cfg.Prefix, Admin: roleFrom(r.Context()) == roleAdmin,
		Notice: r.URL.Query().Get("notice"), Data: data}
	if err := c.tmpl.ExecuteTemplate(w, name, p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (c *Console) fail(w http.ResponseWriter, err error) {
	http.Error(w, "reading the outbox: "+err.Error(), http.StatusServiceUnavailable)
}

// overviewData is the overview page's.
type overviewData struct {
	*store.Overview
	Held []store.HeldKey
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	o, err := c.st.Overview(r.Context())
	if err != nil {
		c.fail(w, err)
		return
	}
	held, err := c.st.HeldKeys(r.Context(), "", 20)
	if err != nil {
		c.fail(w, err)
		return
	}
	c.render(w, r, "overview.html", "Overview", overviewData{Overview: o, Held: held})
}

// failedPageSize is how many FAILED events a page lists.
const failedPageSize = 50

// failedData is the failed events page's.
type failedData struct {
	Filter store.FailedFilter
	Events []store.Failed
	Count  int64
	Next   string // the query of the next page; "" when this is the last
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
	n, err := c.st.CountFailed(r.Context(), f)
	if err != nil {
		c.fail(w, err)
		return
	}
	d := failedData{Filter: f, Events: events, Count: n}
	if len(events) > failedPageSize {
		d.Events = events[:failedPageSize]
		next := url.Values{"after": {d.Events[failedPageSize-1].EventID}}
		for k, v := range map[string]string{"topic": f.Topic, "event_type": f.EventType, "reason": f.Reason} {
			if v != "" {
				next.Set(k, v)
			}
		}
		d.Next = next.Encode()
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

// resend resends one event if it is still FAILED: a stale page changes
// nothing once someone else resent or skipped it.
func (c *Console) resend(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	if !uuidText.MatchString(id) {
		http.Error(w, "id: "+errBadID.Error(), http.StatusBadRequest)
		return
	}
	resent, status, err := c.st.ResendIfFailed(r.Context(), id)
	if err != nil {
		c.fail(w, err)
		return
	}
	notice := "resent " + id
	if !resent {
		notice = "not resent: " + id + " is no longer FAILED (" + orNone(status) + ")"
	}
	c.back(w, r, notice)
}

// skip gives up on one FAILED event (outbox.skip only skips FAILED ones).
func (c *Console) skip(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	if !uuidText.MatchString(id) {
		http.Error(w, "id: "+errBadID.Error(), http.StatusBadRequest)
		return
	}
	skipped, status, err := c.st.Skip(r.Context(), id)
	if err != nil {
		c.fail(w, err)
		return
	}
	notice := "skipped " + id
	if !skipped {
		notice = "not skipped: " + id + " is no longer FAILED (" + orNone(status) + ")"
	}
	c.back(w, r, notice)
}

func orNone(status string) string {
	if status == "" {
		return "no status row"
	}
	return status
}

// back sends the browser to the failed events page with notice (POST,
// then redirect, then GET: a reload does not repeat the action).
func (c *Console) back(w http.ResponseWriter, r *http.Request, notice string) {
	http.Redirect(w, r, c.cfg.Prefix+"/failed?"+url.Values{"notice": {notice}}.Encode(), http.StatusSeeOther)
}
