// Package dashboard is `berth dashboard`: a read-only web page that shows,
// from the live cluster, what an operator wants to see at a glance: node
// groups and their nodes with their cost, headroom desired and ready,
// pending pods and what berth does about each, nodes being drained or
// kept and why, berth's recent decisions, and charts of the last hour.
//
// Build turns what Read read from the cluster into a View (pure: values
// in, view out); History keeps the samples behind the charts; Server
// serves the page, embedded in the binary, and the view as JSON.
package dashboard

import "time"

// View is what the page shows, as /api/state serves it.
type View struct {
	Time        time.Time   `json:"time"`
	Totals      Sample      `json:"totals"`
	NodeGroups  []NodeGroup `json:"nodeGroups"`
	Headrooms   []Headroom  `json:"headrooms"`
	Pending     []Pending   `json:"pending"`
	Disruptions []Disrupted `json:"disruptions"`
	Decisions   []Decision  `json:"decisions"`
	// History is the last hour of samples, oldest first.
	History []Sample `json:"history"`
	// Problems are parts of the cluster that could not be read.
	Problems []string `json:"problems,omitempty"`
}

// Sample is the cluster's totals at one time: the points of the charts.
type Sample struct {
	Time            time.Time `json:"time"`
	Nodes           int       `json:"nodes"`
	ReadyNodes      int       `json:"readyNodes"`
	Pending         int       `json:"pending"`
	PricePerHour    float64   `json:"pricePerHour"`
	HeadroomDesired int32     `json:"headroomDesired"`
	HeadroomReady   int32     `json:"headroomReady"`
}

// NodeGroup is a node group with its nodes.
type NodeGroup struct {
	Name         string      `json:"name"`
	Provider     string      `json:"provider"`
	MinSize      int32       `json:"minSize"`
	MaxSize      int32       `json:"maxSize"`
	Nodes        int         `json:"nodes"`
	ReadyNodes   int         `json:"readyNodes"`
	PricePerHour float64     `json:"pricePerHour"`
	Conditions   []Condition `json:"conditions,omitempty"`
	// Offerings count the group's nodes by instance type, zone and
	// capacity type.
	Offerings []Offering `json:"offerings"`
	NodeList  []Node     `json:"nodeList"`
}

// Condition is a condition of a node group that is True (a problem or a
// hold worth showing).
type Condition struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Offering is how many of a group's nodes run one offering.
type Offering struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Nodes        int     `json:"nodes"`
	PricePerHour float64 `json:"pricePerHour"` // per node
}

// Node is one of berth's nodes.
type Node struct {
	Name         string  `json:"name"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Ready        bool    `json:"ready"`
	PricePerHour float64 `json:"pricePerHour"`
	Age          string  `json:"age"`
	// State is the BerthDisruption condition's reason: what berth does
	// with the node, or why it keeps it.
	State string `json:"state,omitempty"`
}

// Headroom is one Headroom's units and per-node reserve.
type Headroom struct {
	Name         string `json:"name"`
	Desired      int32  `json:"desired"`
	Ready        int32  `json:"ready"`
	Unit         string `json:"unit,omitempty"`
	Placeholders bool   `json:"placeholders"`
	Schedule     string `json:"schedule,omitempty"`
	// Reserve is the per-node reserve's slice, and how many nodes hold it.
	Reserve       string `json:"reserve,omitempty"`
	ReservedNodes int32  `json:"reservedNodes"`
	Message       string `json:"message,omitempty"`
}

// What berth does about a pending pod.
const (
	ActionLaunching   = "launching"   // berth launched a node for it
	ActionWaiting     = "waiting"     // its node is there; the scheduler binds it
	ActionUnplaceable = "unplaceable" // no node group can host it
	ActionGated       = "gated"       // held by berth's companion gate
	ActionPlanning    = "planning"    // berth has not reported on it yet
	ActionScheduler   = "scheduler"   // the scheduler has not found it unschedulable yet
)

// Pending is a pod that waits for a node, and what berth does about it.
type Pending struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Age       string `json:"age"`
	Action    string `json:"action"`
	Node      string `json:"node,omitempty"`
	Message   string `json:"message"`
}

// Disrupted is a node berth drains, replaces or removes, or keeps because
// of a rule.
type Disrupted struct {
	Node      string `json:"node"`
	NodeGroup string `json:"nodeGroup"`
	// Active: berth is disrupting the node; otherwise a rule keeps it.
	Active  bool   `json:"active"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Since   string `json:"since"`
}

// Decision is one of berth's recent events.
type Decision struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  string    `json:"object"`
	Message string    `json:"message"`
}
