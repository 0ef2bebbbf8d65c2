package clusterread

// SetMaxChangedPods lowers the bound of the pods named between two takes.
func (w *PodChanges) SetMaxChangedPods(n int) { w.max = n }
