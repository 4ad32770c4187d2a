package console

import (
	"cmp"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// Chart geometry: a pixel a minute, historyChartHeight pixels for the
// busiest minute, room for the axes' labels around.
const (
	historyChartHeight = 120
	historyChartLeft   = 70 // the y axis' labels
	historyChartBottom = 20 // the x axis' labels
)

// historyData is the History page's.
type historyData struct {
	Topic string // "" for every topic
	// Special: Topic stands for many topics (metrics.TopicOther or
	// metrics.TopicRefused): its events are not listed under that name.
	Special          bool
	From, To         time.Time // the first and last minute shown
	Delivered        int64     // over the 24 hours
	Failed           int64
	DeliveredChart   chart
	FailedChart      chart
	Hours            []historyHour  // per hour, oldest first, every hour of the window
	Topics           []historyTopic // per topic over the 24 hours (without a topic filter)
	TopicsOfTheOther bool           // some topics are counted as metrics.TopicOther
}

// historyHour is an hour's line in the History's table, with the lists of
// the events it counts: SENT, and FAILED, by the time their status last
// changed (those still so).
type historyHour struct {
	store.MinuteCount
	SentList, FailedList string
}

// historyTopic is a topic's line in the History's table.
type historyTopic struct {
	store.MinuteCount
	Special bool // a label that stands for many topics
}

// chart is one series drawn as an SVG: a vertical line a minute, as high
// as its count against the busiest minute.
type chart struct {
	Width, Height int    // of the drawing, axes' labels included
	Left, Base    int    // the x of the first minute, the y of zero
	Path          string // the minutes' lines, an SVG path
	Max           int64  // the busiest minute's count (the top of the y axis)
	Ticks         []tick // on the x axis
	Label         string // what it shows, for screen readers
	Class         string // the series' style: delivered or failed
}

// tick is a label on a chart's x axis.
type tick struct {
	X     int
	Label string
}

// specialTopic reports whether topic is a label of many topics rather than
// a topic's name.
func specialTopic(topic string) bool {
	return topic == metrics.TopicOther || topic == metrics.TopicRefused
}

// history shows events delivered and failed per minute over the last 24
// hours (from the hour 24 hours ago to the current minute: whole hours,
// so that the per-hour and per-topic totals cover the same minutes), of
// every topic or of ?topic=, from the counts the relays write: a row a
// minute (outbox.delivery_minutes, the topic's or the total's) and, for
// the topics' totals, a row a topic and hour (outbox.delivery_hours); never
// from outbox.deliveries.
func (c *Console) history(w http.ResponseWriter, r *http.Request) {
	to := c.now().UTC().Truncate(time.Minute)
	from := to.Truncate(time.Hour).Add(-24 * time.Hour)
	n := int(to.Sub(from)/time.Minute) + 1
	d := historyData{Topic: r.URL.Query().Get("topic"), From: from, To: to}
	d.Special = specialTopic(d.Topic)
	minutes, err := c.st.DeliveryMinutes(r.Context(), from, cmp.Or(d.Topic, store.AllTopics))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	delivered := make([]int64, n)
	failed := make([]int64, n)
	for h := from; !h.After(to); h = h.Add(time.Hour) {
		q := url.Values{"since": {h.Format(time.RFC3339)}, "until": {h.Add(time.Hour).Format(time.RFC3339)}}
		if d.Topic != "" && !d.Special {
			q.Set("topic", d.Topic)
		}
		failed := c.cfg.Prefix + "/failed?" + q.Encode()
		q.Set("status", "SENT")
		d.Hours = append(d.Hours, historyHour{MinuteCount: store.MinuteCount{Minute: h},
			SentList: c.cfg.Prefix + "/events?" + q.Encode(), FailedList: failed})
	}
	for _, m := range minutes {
		i := int(m.Minute.Sub(from) / time.Minute)
		if i < 0 || i >= n { // a relay's clock ahead of the console's
			continue
		}
		delivered[i] += m.Delivered
		failed[i] += m.Failed
		d.Delivered += m.Delivered
		d.Failed += m.Failed
		hour := &d.Hours[i/60]
		hour.Delivered += m.Delivered
		hour.Failed += m.Failed
	}
	d.DeliveredChart = drawChart(delivered, from, "events delivered per minute", "delivered")
	d.FailedChart = drawChart(failed, from, "events failed per minute", "failed")
	if d.Topic == "" {
		topics, err := c.st.DeliveryTopicsByHour(r.Context(), from)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		for _, t := range topics {
			d.Topics = append(d.Topics, historyTopic{MinuteCount: t, Special: specialTopic(t.Topic)})
			d.TopicsOfTheOther = d.TopicsOfTheOther || t.Topic == metrics.TopicOther
		}
	}
	title := "History"
	if d.Topic != "" {
		title = "History of " + d.Topic
	}
	c.render(w, r, "history.html", title, d)
}

// drawChart draws counts, a minute each from from on, as a chart.
func drawChart(counts []int64, from time.Time, label, class string) chart {
	ch := chart{Width: historyChartLeft + len(counts) + 10, Height: historyChartHeight + historyChartBottom + 10,
		Left: historyChartLeft, Base: historyChartHeight + 5, Label: label, Class: class}
	for _, n := range counts {
		ch.Max = max(ch.Max, n)
	}
	var p strings.Builder
	for i, n := range counts {
		if n == 0 {
			continue
		}
		// At least a pixel: a minute with one failure among thousands shows.
		h := max(1, int(n*historyChartHeight/ch.Max))
		p.WriteString("M" + strconv.Itoa(ch.Left+i) + " " + strconv.Itoa(ch.Base) + "v-" + strconv.Itoa(h))
	}
	ch.Path = p.String()
	// A tick every three hours, on the hour.
	for i := range counts {
		if m := from.Add(time.Duration(i) * time.Minute); m.Minute() == 0 && m.Hour()%3 == 0 {
			ch.Ticks = append(ch.Ticks, tick{X: ch.Left + i, Label: m.Format("15:04")})
		}
	}
	return ch
}
