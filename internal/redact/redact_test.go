package redact_test

import (
	"strings"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/redact"
)

func TestURL_HidesEverySecretParameterAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://app@db/app?sslmode=verify-full&sslpassword=s3cret&sslkey=/k.pem": "postgres://app@db/app?sslmode=verify-full&sslpassword=xxxxx&sslkey=/k.pem",
		"postgres://app:s3cret@db/app?password=s3cret&application_name=relay":        "postgres://app:xxxxx@db/app?password=xxxxx&application_name=relay",
		"postgres://app@db/app?pass%77ord=s3cret":                                    "postgres://app@db/app?pass%77ord=xxxxx",
		"http://relay-1:9677/metrics?token=s3cret&x=1":                               "http://relay-1:9677/metrics?token=xxxxx&x=1",
		"https://ops:s3cret@relay-1/metrics?api_secret=s3cret":                       "https://ops:xxxxx@relay-1/metrics?api_secret=xxxxx",
		// An @ in the password, not encoded: everything up to the last @.
		"postgres://app:s3@cret@db/app": "postgres://app:xxxxx@db/app",
		// A URL that does not parse.
		"postgres://app:s3:cr@et@db:port/app?sslpassword=s3cret&sslmode=require": "postgres://app:xxxxx@db:port/app?sslpassword=xxxxx&sslmode=require",
		"host=db user=app sslpassword=s3cret sslkey=/k.pem dbname=app":           "host=db user=app sslpassword=xxxxx sslkey=/k.pem dbname=app",
		"host=db password = 's3 cret' dbname=app":                                "host=db password = xxxxx dbname=app",
		"postgres://app@db/app?sslmode=disable":                                  "postgres://app@db/app?sslmode=disable",
	} {
		got := redact.URL(in)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
		for _, part := range []string{"s3cret", "s3:cr", "cr@et", "@cret"} {
			if strings.Contains(got, part) {
				t.Errorf("URL(%q) = %q shows %q", in, got, part)
			}
		}
	}
}
