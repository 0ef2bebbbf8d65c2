package clusterread

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/state"
)

func set(key state.Key, count int32, made *int) Set {
	return Set{Key: key, Count: count, make: func(n int32) []*corev1.Pod {
		*made += int(n)
		return make([]*corev1.Pod, n)
	}}
}

func buffer(ns, name string) state.Key {
	return state.Key{Owner: state.OwnerCapacityBuffer, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func TestShare(t *testing.T) {
	hr := state.HeadroomKey
	tests := []struct {
		name   string
		keys   []state.Key
		counts []int32
		max    int
		want   []int32
	}{
		{name: "everything fits", keys: []state.Key{hr("a"), buffer("x", "b")}, counts: []int32{10, 20}, max: 100, want: []int32{10, 20}},
		{name: "headrooms come first", keys: []state.Key{buffer("x", "b"), hr("a")}, counts: []int32{50, 80}, max: 100, want: []int32{20, 80}},
		{name: "namespaces share fairly, not in name order",
			keys: []state.Key{buffer("a", "big"), buffer("b", "small"), buffer("c", "big")}, counts: []int32{1000, 10, 1000}, max: 110,
			want: []int32{50, 10, 50}},
		{name: "many buffers of one namespace buy it no more than one",
			keys: []state.Key{buffer("greedy", "1"), buffer("greedy", "2"), buffer("greedy", "3"), buffer("fair", "1")}, counts: []int32{100, 100, 100, 100}, max: 100,
			want: []int32{17, 17, 16, 50}},
		{name: "the leftover goes one by one", keys: []state.Key{buffer("a", "x"), buffer("b", "x"), buffer("c", "x")}, counts: []int32{10, 10, 10}, max: 20,
			want: []int32{7, 7, 6}},
		{name: "nothing for buffers when headrooms take it all", keys: []state.Key{hr("a"), buffer("x", "b")}, counts: []int32{100, 5}, max: 100, want: []int32{100, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sets []Set
			made := 0
			for i, k := range tt.keys {
				sets = append(sets, set(k, tt.counts[i], &made))
			}
			if diff := cmp.Diff(tt.want, Share(sets, tt.max)); diff != "" {
				t.Errorf("shares (-want +got):\n%s", diff)
			}
			units, _ := MakeUnits(sets, tt.max)
			total := 0
			for _, n := range tt.want {
				total += int(n)
			}
			if len(units) != total || made != total {
				t.Errorf("made %d pods (%d units), want only the %d allowed", made, len(units), total)
			}
		})
	}
}

// TestMakeNeverMaterializesPastTheCap: a thousand buffers of ten thousand
// chunks each make at most the cap in pods.
func TestMakeNeverMaterializesPastTheCap(t *testing.T) {
	made := 0
	var sets []Set
	for i := range 1000 {
		sets = append(sets, set(buffer("ns", string(rune('a'+i%26))+string(rune('a'+i/26))), 10000, &made))
	}
	units, capped := MakeUnits(sets, DefaultMaxUnits)
	if len(units) != DefaultMaxUnits || made != DefaultMaxUnits {
		t.Errorf("made %d pods, %d units; want %d", made, len(units), DefaultMaxUnits)
	}
	if len(capped) != 1000 {
		t.Errorf("%d sets reported capped, want all 1000", len(capped))
	}
}
