package controller

import "testing"

// TestSoftMemoryLimit: the runtime's soft limit is 90 % of the container's
// memory limit the chart passes, a GOMEMLIMIT the user set wins, and a
// limit that is no number of bytes is an error at start.
func TestSoftMemoryLimit(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    int64
		set     bool
		wantErr bool
	}{
		{name: "90 % of the container's limit", env: map[string]string{"BERTH_MEMORY_LIMIT": "536870912"}, want: 483183820, set: true},
		{name: "the user's GOMEMLIMIT wins", env: map[string]string{"BERTH_MEMORY_LIMIT": "536870912", "GOMEMLIMIT": "300MiB"}},
		{name: "no limit", env: map[string]string{}},
		{name: "not bytes", env: map[string]string{"BERTH_MEMORY_LIMIT": "512Mi"}, wantErr: true},
		{name: "zero", env: map[string]string{"BERTH_MEMORY_LIMIT": "0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, set, err := softMemoryLimit(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr || set != tt.set || got != tt.want {
				t.Errorf("soft limit %d, set %v, error %v; want %d, %v, error %v", got, set, err, tt.want, tt.set, tt.wantErr)
			}
		})
	}
}
