package controller

import (
	"strings"
	"testing"
)

// TestFlagsThatWouldExposeOrBreakAreRejected: the command refuses, before
// it connects anywhere, flags that would serve metrics without
// authentication on a reachable address or make leader election unsafe.
func TestFlagsThatWouldExposeOrBreakAreRejected(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" means accepted
	}{
		{name: "the defaults are accepted", args: nil},
		{name: "plain metrics on loopback are accepted", args: []string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:8080"}},
		{name: "plain metrics on localhost are accepted", args: []string{"--metrics-secure=false", "--metrics-bind-address=localhost:8080"}},
		{name: "metrics off are accepted", args: []string{"--metrics-secure=false", "--metrics-bind-address=0"}},
		{name: "plain metrics on every interface are rejected", args: []string{"--metrics-secure=false", "--metrics-bind-address=:8080"}, wantErr: "loopback"},
		{name: "plain metrics on a public address are rejected", args: []string{"--metrics-secure=false", "--metrics-bind-address=10.0.0.5:8080"}, wantErr: "loopback"},
		{name: "profiles on loopback are accepted", args: []string{"--pprof-bind-address=127.0.0.1:6060"}},
		{name: "profiles on every interface are rejected", args: []string{"--pprof-bind-address=:6060"}, wantErr: "pprof-bind-address"},
		{name: "no time to sync the caches is rejected", args: []string{"--cache-sync-timeout=0"}, wantErr: "--cache-sync-timeout"},
		{name: "no deletion delay is accepted", args: []string{"--node-deletion-delay-timeout=0"}},
		{name: "a negative deletion delay is rejected", args: []string{"--node-deletion-delay-timeout=-1s"}, wantErr: "--node-deletion-delay-timeout"},
		{name: "a renew deadline longer than the lease is rejected", args: []string{"--leader-election-lease-duration=5s", "--leader-election-renew-deadline=10s"}, wantErr: "lease duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &options{}
			if err := newCommand(o).ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}
