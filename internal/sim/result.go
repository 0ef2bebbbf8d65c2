package sim

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
	// Pods are the trace's pods; Recreated the pods their controllers made
	// again after an eviction (each waits for a node again, and counts in
	// the waits). PodsWaited are the pods (of both) whose first scheduling
	// attempt found no node; PodsWaitedForLaunch those of them a node was
	// launched for while they waited; Unbound those still pending at the
	// end.
	Pods                int `json:"pods"`
	Recreated           int `json:"recreated"`
	PodsWaited          int `json:"podsWaited"`
	PodsWaitedForLaunch int `json:"podsWaitedForLaunch"`
	Unbound             int `json:"unbound"`
	// Wait is the wait for capacity (creation to bound) of the pods that
	// waited; WaitAll of every pod (0 for those bound at once).
	Wait    WaitStats `json:"wait"`
	WaitAll WaitStats `json:"waitAll"`
	WaitCDF []Point   `json:"waitCDF,omitempty"`
	// Launches are nodes launched (LaunchesForHeadroom for headroom units
	// alone); Removals nodes removed; Drains drains started; Evictions
	// pods evicted; Replacements cheaper nodes launched to replace others;
	// Preemptions placeholders preempted by real pods.
	Launches            int      `json:"launches"`
	LaunchesForHeadroom int      `json:"launchesForHeadroom"`
	Removals            int      `json:"removals"`
	Drains              int      `json:"drains"`
	Evictions           int      `json:"evictions"`
	Replacements        int      `json:"replacements"`
	Preemptions         int      `json:"preemptions"`
	Series              []Sample `json:"series"`
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
}
