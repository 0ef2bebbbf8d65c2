package sim

import "github.com/berth-dev/berth/internal/headroom/demand"

// Result is what one policy's simulation came to.
type Result struct {
	Policy  string  `json:"policy"`
	Seconds float64 `json:"seconds"`
	// Cost is the price of the nodes over the trace; CostPerHour its mean.
	Cost        float64 `json:"cost"`
	CostPerHour float64 `json:"costPerHour"`
	// HeadroomCost is the share of the cost of the room headroom units
	// held (price of each node times the share of its cpu they held).
	HeadroomCost  float64     `json:"headroomCost"`
	HeadroomShare float64     `json:"headroomShare"`
	NodeHours     []TypeHours `json:"nodeHours"`
	// RunningAtStart are the trace's pods running when it began (placed
	// before the clock started, counted in no wait; not in Pods) and
	// NodesAtStart the nodes launched for them and the headroom.
	// Pods are the trace's other pods; Recreated the pods their controllers made
	// again after an eviction (each waits for a node again, and counts in
	// the waits). PodsWaited are the pods (of both) whose first scheduling
	// attempt found no node; PodsWaitedForLaunch those of them a node was
	// launched for while they waited; Unbound those still pending at the
	// end; DeletedUnbound those deleted while they waited (their wait, to
	// the deletion, counts in the waits).
	RunningAtStart      int `json:"runningAtStart,omitempty"`
	NodesAtStart        int `json:"nodesAtStart,omitempty"`
	Pods                int `json:"pods"`
	Recreated           int `json:"recreated"`
	PodsWaited          int `json:"podsWaited"`
	PodsWaitedForLaunch int `json:"podsWaitedForLaunch"`
	Unbound             int `json:"unbound"`
	DeletedUnbound      int `json:"deletedUnbound,omitempty"`
	// Wait is the wait for capacity (creation to bound) of the pods that
	// waited; WaitAll of every pod (0 for those bound at once).
	Wait    WaitStats `json:"wait"`
	WaitAll WaitStats `json:"waitAll"`
	WaitCDF []Point   `json:"waitCDF,omitempty"`
	// Launches are nodes launched (LaunchesForHeadroom for headroom units
	// alone); Removals nodes removed; Drains drains started; Evictions
	// pods evicted; Replacements cheaper nodes launched to replace others;
	// Preemptions placeholders preempted by real pods.
	Launches            int `json:"launches"`
	LaunchesForHeadroom int `json:"launchesForHeadroom"`
	Removals            int `json:"removals"`
	Drains              int `json:"drains"`
	Evictions           int `json:"evictions"`
	Replacements        int `json:"replacements"`
	Preemptions         int `json:"preemptions"`
	// Resumes are suspended standby nodes resumed instead of a launch.
	Resumes int      `json:"resumes,omitempty"`
	Series  []Sample `json:"series"`
	// Target is the goal of the policy's first Headroom with a target,
	// and how the run fared against it (nil without a target).
	Target *TargetResult `json:"target,omitempty"`
	// WaitAllCDF is the distribution of every pod's wait (see Within).
	WaitAllCDF []Point `json:"waitAllCDF,omitempty"`
	// Histories are the demand histories the Headrooms with a target
	// learned (for Config.Histories of another run).
	Histories map[string]*demand.History `json:"-"`
	// BurstHistories are the burst-window histories (spec.standby).
	BurstHistories map[string]*demand.History `json:"-"`
	// Shapes are the shapes learned apart (spec.target.shapes Learned).
	Shapes map[string]*demand.Saved `json:"-"`
}

// Within is the share (0-1) of the pods whose wait was at most s seconds
// (the sketch's buckets are 2 % wide: a wait up to 2 % above s may
// count).
func (r *Result) Within(s float64) float64 {
	share := 0.0
	for _, p := range r.WaitAllCDF {
		if p.Seconds > s*1.02 {
			break
		}
		share = p.Fraction
	}
	return share
}

// TypeHours are node-hours of one instance and capacity type.
type TypeHours struct {
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Hours        float64 `json:"hours"`
}

// WaitStats are quantiles of waits, in seconds.
type WaitStats struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Point is a point of a cumulative distribution.
type Point struct {
	Seconds  float64 `json:"seconds"`
	Fraction float64 `json:"fraction"`
}

// Sample is the cluster at one time (seconds since the start).
type Sample struct {
	At              float64 `json:"at"`
	Nodes           int     `json:"nodes"`
	Launching       int     `json:"launching"`
	Pending         int     `json:"pending"`
	CostPerHour     float64 `json:"costPerHour"`
	HeadroomDesired int     `json:"headroomDesired"`
	HeadroomReady   int     `json:"headroomReady"`
	// Standby nodes (booting to be suspended, or suspended).
	Standby int `json:"standby,omitempty"`
}

// TargetResult is a run against a wait-time goal.
type TargetResult struct {
	Headroom string  `json:"headroom"`
	Wait     float64 `json:"waitSeconds"`
	Percent  int32   `json:"percent"`
	// Within is the share (0-1) of the pods that got capacity within
	// Wait; Met whether it reached Percent.
	Within float64 `json:"within"`
	Met    bool    `json:"met"`
	// Phase and Units of the target at the end.
	Phase string `json:"phase"`
	Units int32  `json:"units"`
}
