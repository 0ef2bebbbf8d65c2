package scaleup

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Options keeps the options of every node group and zone from one round
// to the next. An option (an instance type and capacity type in a zone,
// with its labels, price, allocatable and DaemonSet overhead) depends
// only on its group's spec, on the DaemonSets, on which offerings are
// unavailable and on what the group's nodes were seen to have (observed); building every option of a large catalogue is about a
// quarter of a small round (400 types in 5 offerings: 2,000 options), so
// a round reuses those nothing changed for. Options never change once
// built, and their node objects are read only.
//
// A group is known by its UID and generation (the API server bumps the
// generation on every change of spec), the DaemonSets by theirs (and by
// what their pods hold, when read from a pod: daemonset.AsRun): objects
// without a UID (offline planning, tests) are never cached, nor groups
// whose provider rewrites their spec in each round's copy (Cluster API:
// the annotations of the group's object) without a new generation. Not
// safe for concurrent rounds: one planner (the provisioner) owns one.
type Options struct {
	byZone map[zoneKey]*zoneEntry
	// seen marks the entries a round used; the others are dropped at
	// its end, so the cache holds the current groups only.
	seen map[zoneKey]bool
}

type zoneKey struct {
	group types.UID
	zone  string
}

type zoneEntry struct {
	generation  int64
	daemonSets  string
	unavailable string
	observed    string
	opts        []*snapshot.Option
}

// NewOptions returns an empty cache.
func NewOptions() *Options {
	return &Options{byZone: map[zoneKey]*zoneEntry{}, seen: map[zoneKey]bool{}}
}

// daemonSetsKey names the DaemonSets by UID and generation, and by what
// their pods hold for those read from a pod (daemonset.AsRun); ok is false
// when one has no UID (not read from an API server).
func daemonSetsKey(dss []*appsv1.DaemonSet) (string, bool) {
	var b strings.Builder
	for _, ds := range dss {
		if ds.UID == "" {
			return "", false
		}
		b.WriteString(string(ds.UID))
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(ds.Generation, 10))
		b.WriteByte('/')
		b.WriteString(ds.Annotations[daemonset.AnnotationAsRun]) // what its pods hold, when read from them
		b.WriteByte(',')
	}
	return b.String(), true
}

// unavailableKey names the group's unavailable offerings in a zone.
func unavailableKey(group, zone string, unavailable map[Offering]bool) string {
	var keys []string
	for o, off := range unavailable {
		if off && o.NodeGroup == group && o.Zone == zone {
			keys = append(keys, o.InstanceType+"/"+o.CapacityType)
		}
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// get returns the cached options of a group's zone, or builds them with
// build and keeps them; a nil cache always builds.
func (c *Options) get(ng *v1alpha1.NodeGroup, zone string, dss string, cacheable bool, unavailable map[Offering]bool, seen *observed,
	build func() ([]*snapshot.Option, error)) ([]*snapshot.Option, error) {
	if c == nil || !cacheable || ng.UID == "" || ng.Spec.Provider.ClusterAPI != nil {
		return build()
	}
	key := zoneKey{group: ng.UID, zone: zone}
	c.seen[key] = true
	unavail, obs := unavailableKey(ng.Name, zone, unavailable), seen.key(ng.Name)
	if e := c.byZone[key]; e != nil && e.generation == ng.Generation && e.daemonSets == dss && e.unavailable == unavail && e.observed == obs {
		return e.opts, nil
	}
	opts, err := build()
	if err != nil {
		delete(c.byZone, key)
		return nil, err
	}
	c.byZone[key] = &zoneEntry{generation: ng.Generation, daemonSets: dss, unavailable: unavail, observed: obs, opts: opts}
	return opts, nil
}

// sweep drops the entries the round did not use (a group or zone gone).
func (c *Options) sweep() {
	if c == nil {
		return
	}
	for key := range c.byZone {
		if !c.seen[key] {
			delete(c.byZone, key)
		}
	}
	clear(c.seen)
}
