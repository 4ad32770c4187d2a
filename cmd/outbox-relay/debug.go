package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/flagenv"
)

// debugHandler serves Go's pprof profiles for --debug-addr, and nothing
// else: not /debug/pprof/cmdline, nor expvar's /debug/vars (both of which
// http.DefaultServeMux serves once their packages are linked in), since
// the command line holds every flag, passwords and tokens included. Unless
// allowRemote, it answers only requests whose Host is a loopback name, so
// that a web page whose name a browser resolved to 127.0.0.1 (DNS
// rebinding) cannot read the profiles.
func debugHandler(allowRemote bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // and the named profiles: heap, goroutine, ...
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not served: the command line holds secrets", http.StatusNotFound)
	})
	if allowRemote {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = strings.Trim(r.Host, "[]") // no port
		}
		if !console.IsLoopbackHost(host) {
			http.Error(w, "--debug-addr answers only requests addressed to a loopback name (Host: localhost or 127.0.0.1)", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// checkDebugAddr refuses a --debug-addr that is not on loopback (":6060"
// listens on every interface) unless --debug-addr-allow-remote says so.
func checkDebugAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return flagenv.Usagef("--debug-addr %q: %v", addr, err)
	}
	if !allowRemote && !console.IsLoopbackHost(host) {
		return flagenv.Usagef("--debug-addr %s is not a loopback address: the profiles show the process's memory and "+
			"goroutines to whoever reaches the port; listen on 127.0.0.1 (or set --debug-addr-allow-remote)", addr)
	}
	return nil
}
