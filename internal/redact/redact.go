// Package redact removes secrets from strings before they reach logs.
package redact

import (
	"net/url"
	"regexp"
)

var (
	dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
	// urlPassword is the password of a URL that url.Parse refuses (a port
	// that is not a number, say): scheme://user:password@...
	urlPassword = regexp.MustCompile(`(://[^/?#@:]*:)[^@]*@`)
)

// URL hides the password in a database URL or key=value DSN.
func URL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	s = urlPassword.ReplaceAllString(s, "${1}xxxxx@")
	return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
}

// Hidden is what a secret is shown as.
const Hidden = "xxxxx"

// Secret hides a value that is a secret as a whole (a password); the
// empty string stays empty, so that help can say a secret is unset.
func Secret(s string) string {
	if s == "" {
		return ""
	}
	return Hidden
}
