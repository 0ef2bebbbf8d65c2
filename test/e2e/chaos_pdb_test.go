package e2e

import (
	policyv1 "k8s.io/api/policy/v1"
)

// checkHealthy counts the web pods the PDB counts (Ready, not being
// deleted). The check is armed once the count has reached the minimum
// the test asked for (pdbWant): from then on it must never drop below.
func (w *chaosWatcher) checkHealthy() {
	if w.pdbWant == 0 {
		return
	}
	n := w.healthyNow()
	if !w.armed && n >= w.pdbWant {
		w.armed = true
		w.statusArmed = w.lastMargin != nil && *w.lastMargin >= 0
	}
	if !w.armed {
		return
	}
	w.minHealthy = min(w.minHealthy, n)
	if n < w.pdbWant && !w.below {
		w.violate(violPDB, "%d healthy web pods, PDB minAvailable %d", n, w.pdbWant)
	}
	w.below = n < w.pdbWant
}

// guardPDB checks, from the moment the web Deployment has minAvailable
// healthy pods on, that it keeps them (the test calls it while it does
// not scale the Deployment below the minimum).
func (w *chaosWatcher) guardPDB(minAvailable int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pdbWant != minAvailable {
		w.pdbWant, w.armed, w.statusArmed, w.below, w.statusBelow = minAvailable, false, false, false, false
	}
	w.checkHealthy()
}

// unguardPDB stops the check before the test scales the Deployment below
// its minimum.
func (w *chaosWatcher) unguardPDB() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pdbWant, w.armed, w.statusArmed = 0, false, false
}

func (w *chaosWatcher) pdbEvent(obj any, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	obj, _ = unwrap(obj)
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok || deleted || pdb.Namespace != w.ns {
		return
	}
	w.pdbChanges++
	margin := pdb.Status.CurrentHealthy - pdb.Status.DesiredHealthy
	w.lastMargin = &margin
	// The status lags the pods: it is judged from the first status that
	// shows the minimum met once the pod count's check is armed.
	if !w.armed || (!w.statusArmed && margin < 0) {
		return
	}
	w.statusArmed = true
	w.minMargin = min(w.minMargin, margin)
	below := margin < 0 && pdb.Status.ObservedGeneration == pdb.Generation
	defer func() { w.statusBelow = below }()
	if below && !w.statusBelow {
		w.violate(violPDB, "PDB %s status: currentHealthy %d < desiredHealthy %d (disrupted pods %d, healthy web pods counted now %d)",
			pdb.Name, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy, len(pdb.Status.DisruptedPods), w.healthyNow())
	}
}

func (w *chaosWatcher) healthyNow() int32 {
	n := int32(0)
	for _, ok := range w.healthy {
		if ok {
			n++
		}
	}
	return n
}
