// Package redact removes secrets from strings before they reach logs.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

var (
	// dsnSecret is a key=value DSN's secret setting: password, sslpassword,
	// or any key whose name says it is one (SecretName).
	dsnSecret = regexp.MustCompile(`(?i)(\b[a-z_]*(?:password|secret|token)[a-z_]*\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
	// urlPassword is the password of a URL that url.Parse refuses (a port
	// that is not a number, say): scheme://user:password@..., up to the
	// last @, since a password may hold an unencoded one.
	urlPassword = regexp.MustCompile(`(://[^/?#@:]*:).*@`)
	// querySecret is a secret query parameter of such a URL.
	querySecret = regexp.MustCompile(`(?i)([?&][^=&#]*(?:password|secret|token)[^=&#]*=)[^&#]*`)
)

// SecretName reports whether a URL query parameter or DSN key named name
// holds a secret: libpq's password and sslpassword, and any name with
// password, secret or token in it (a metrics URL's ?token=). sslkey and
// passfile are paths, not secrets.
func SecretName(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// URL hides the secrets of a database URL or key=value DSN, or of any URL:
// the password of its user, and each query parameter whose name says it
// is a secret (SecretName), such as ?sslpassword=.
func URL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Hidden)
		}
		u.RawQuery = query(u.RawQuery)
		return u.String()
	}
	if strings.Contains(s, "://") {
		s = urlPassword.ReplaceAllString(s, "${1}"+Hidden+"@")
		return querySecret.ReplaceAllString(s, "${1}"+Hidden)
	}
	return dsnSecret.ReplaceAllString(s, "${1}"+Hidden)
}

// query hides the secret parameters of a raw query, in place: the others
// stay as they were written.
func query(raw string) string {
	if raw == "" {
		return raw
	}
	params := strings.Split(raw, "&")
	for i, p := range params {
		name, _, hasValue := strings.Cut(p, "=")
		if decoded, err := url.QueryUnescape(name); err == nil {
			name = decoded
		}
		if hasValue && SecretName(name) {
			params[i] = p[:strings.IndexByte(p, '=')+1] + Hidden
		}
	}
	return strings.Join(params, "&")
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
