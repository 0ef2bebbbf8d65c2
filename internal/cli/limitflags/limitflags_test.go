package limitflags

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestLimitFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string // "" means accepted
		wantCPU string
	}{
		{args: nil, wantCPU: "320k"}, // Cluster Autoscaler's default
		{args: []string{"--cluster-max-cpu=64"}, wantCPU: "64"},
		{args: []string{"--cluster-max-cpu=lots"}, wantErr: "quantities must match"},
		// apimachinery's parser does not return on this one.
		{args: []string{"--cluster-max-cpu=1e2147483648"}, wantErr: "exponent of more than 3 digits"},
		{args: []string{"--cluster-max-memory=-1Gi"}, wantErr: "--cluster-max-memory must be positive"},
		{args: []string{"--cluster-max-cpu=0"}, wantErr: "--cluster-max-cpu must be positive"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var l ClusterLimits
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			l.Bind(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				got, lerr := l.List()
				err = lerr
				if err == nil && got.Cpu().String() != tt.wantCPU {
					t.Errorf("cpu limit %s, want %s", got.Cpu().String(), tt.wantCPU)
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNodeCapFlags(t *testing.T) {
	tests := []struct {
		args            []string
		wantErr         string
		total, perRound int
	}{
		{args: nil, total: 0, perRound: DefaultNodesPerRound},
		{args: []string{"--max-nodes-total=500", "--max-nodes-per-round=0"}, total: 500, perRound: 0},
		{args: []string{"--max-nodes-total=-1"}, wantErr: "--max-nodes-total must be 0 (no cap) or positive, not -1"},
		{args: []string{"--max-nodes-per-round=-5"}, wantErr: "--max-nodes-per-round must be 0 (no cap) or positive, not -5"},
		{args: []string{"--max-nodes-total=many"}, wantErr: "invalid argument"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var l ClusterLimits
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			l.Bind(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				caps, cerr := l.Caps()
				err = cerr
				if err == nil && (caps.Total != tt.total || caps.PerRound != tt.perRound) {
					t.Errorf("caps %+v, want total %d and %d a round", caps, tt.total, tt.perRound)
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
