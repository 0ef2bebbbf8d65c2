package netaddr_test

import (
	"testing"

	"github.com/berth-dev/berth/internal/netaddr"
)

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8090": true, "localhost:6060": true, "[::1]:8080": true, "0": true,
		"0.0.0.0:8090": false, ":8090": false, "10.0.0.5:8090": false, "example.com:80": false, "127.0.0.1": false} {
		if got := netaddr.Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
