package mapping

import (
	"fmt"
	"testing"
)

func TestTraceHeaders_ReadAValueAloneOrJavaProperties(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for in, want := range map[string]string{
		tp:               "[traceparent=" + tp + "]",
		"  " + tp + "\n": "[traceparent=" + tp + "]",
		"#comment\ntraceparent=" + tp + "\nother=1\n":             "[traceparent=" + tp + "]",
		"traceparent : " + tp + "\ntracestate=a\\=1,b\\:2\\u0021": "[traceparent=" + tp + " tracestate=a=1,b:2!]",
		"# only a comment\n": "[]",
		"":                   "[]",
	} {
		var got []string
		for _, h := range traceHeaders([]byte(in)) {
			got = append(got, string(h.Key)+"="+string(h.Value))
		}
		if s := fmt.Sprint(got); s != want && !(want == "[]" && got == nil) {
			t.Errorf("traceHeaders(%q) = %s, want %s", in, s, want)
		}
	}
}
