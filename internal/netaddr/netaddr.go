// Package netaddr says whether an address is a loopback one: servers
// berth runs without authentication (profiles, plain metrics, the
// dashboard) listen only there.
package netaddr

import "net"

// Loopback reports whether addr (host:port) listens only on a loopback
// interface; "0" (a server turned off) counts as safe.
func Loopback(addr string) bool {
	if addr == "0" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return LoopbackHost(host)
}

// LoopbackHost reports whether host (a name or an IP, without a port) is
// a loopback one: localhost or a loopback IP.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
