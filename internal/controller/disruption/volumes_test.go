package disruption_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// attach records that the volume pv is attached to node, as the
// attach-detach controller does for a CSI volume (a VolumeAttachment);
// the test deletes it when it ends.
func (f *fixture) attach(pv, node string) *storagev1.VolumeAttachment {
	f.t.Helper()
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-" + pv}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "csi.test.berth.dev", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}
	if err := env.Client.Create(context.Background(), va); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), va) })
	return va
}

// sharedVolume creates a ReadWriteMany CSI PersistentVolume pv and its
// claim in the fixture's namespace, and waits until they are bound.
func (f *fixture) sharedVolume(pv, claim string) {
	f.t.Helper()
	ctx := context.Background()
	vol := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}, Spec: corev1.PersistentVolumeSpec{
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		ClaimRef:    &corev1.ObjectReference{Namespace: f.ns, Name: claim},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: "csi.test.berth.dev", VolumeHandle: pv}},
	}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: f.ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeName: pv, StorageClassName: new(string),
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	for _, o := range []client.Object{vol, pvc} {
		if err := env.Client.Create(ctx, o); err != nil {
			f.t.Fatal(err)
		}
	}
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vol) })
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, "claim " + claim + " is " + string(pvc.Status.Phase), err
	})
}

// agentsWithVolume runs a DaemonSet on the group's nodes whose pods mount
// the claim, and waits until one runs on each node.
func (f *fixture) agentsWithVolume(claim string) {
	f.t.Helper()
	f.agents("with-volume", nil, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
}

// startDrain runs the round that starts the drain of one node, and
// returns that node.
func (f *fixture) startDrain() string {
	f.t.Helper()
	res := f.run()
	if len(res.Started) != 1 {
		f.t.Fatalf("started %v, want one node drained", res.Started)
	}
	return res.Started[0]
}

// drainUntilEmptied runs rounds, a second apart, until the draining
// node's pod of web is gone from it, and then one more (that finds it
// gone).
func (f *fixture) drainUntilEmptied(node string) *disruption.Result {
	f.t.Helper()
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		f.clk.Step(time.Second)
		f.run()
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns), client.MatchingLabels{"app": "web"}, client.MatchingFields{"spec.nodeName": node}); err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods of web still on %s", len(pods.Items), node), nil
	})
	return f.run()
}

// said is the message of the node's last event of reason ("" when none).
func (f *fixture) said(node, reason string) string {
	msg := ""
	for _, e := range f.events.For(node) {
		if e.Reason == reason {
			msg = e.Message
		}
	}
	return msg
}

// TestARemovalWaitsForItsVolumesToDetach: a drained node whose pod is
// gone still has the pod's volume attached (its VolumeAttachment): berth
// does not remove the machine until the attachment is gone, and says
// what it waits for. The volume of a DaemonSet pod that stays on the node
// until the machine goes is not waited for.
func TestARemovalWaitsForItsVolumesToDetach(t *testing.T) {
	f := setup(t, "sd-volumes", 2)
	f.deploymentOf(2, "900m") // first: it waits for 2 pods running in the namespace, which the agents would be
	f.sharedVolume("sd-volumes-agent", "agent-data")
	f.agentsWithVolume("agent-data")
	victim := f.startDrain()
	web := f.attach("sd-volumes-web", victim)
	f.attach("sd-volumes-agent", victim)
	f.drainUntilEmptied(victim)

	for range 3 {
		f.clk.Step(time.Minute)
		if res := f.run(); slices.Contains(res.Removed, victim) || f.node(victim) == nil {
			t.Fatalf("node %s removed while the volume of its pod is attached", victim)
		}
	}
	// A controller started meanwhile waits too (the node emptied at the
	// time written on it).
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: f.ctrl.Cloud, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
	if f.run(); f.node(victim) == nil {
		t.Fatalf("node %s removed after a restart while the volume of its pod is attached", victim)
	}
	msg := f.said(victim, disruption.ReasonAwaitingVolumeDetachment)
	if !strings.Contains(msg, "sd-volumes-web") || strings.Contains(msg, "sd-volumes-agent") {
		t.Errorf("event %s on %s: %q, want it to name sd-volumes-web and not the agent's volume (its pod stays)", disruption.ReasonAwaitingVolumeDetachment, victim, msg)
	}

	if err := env.Client.Delete(context.Background(), web); err != nil {
		t.Fatal(err)
	}
	if res := f.run(); !slices.Contains(res.Removed, victim) {
		t.Fatalf("removed %v once the volume detached, want %s (the agent's volume stays attached with its pod)", res.Removed, victim)
	}
}

// TestAVolumeThatNeverDetachesHoldsTheNodeOnlyForTheDrainTimeout: the
// wait for a volume to detach lasts the drain timeout from when the pods
// were gone (the drain started 3 minutes before); then the machine is
// removed all the same, with a warning.
func TestAVolumeThatNeverDetachesHoldsTheNodeOnlyForTheDrainTimeout(t *testing.T) {
	f := setup(t, "sd-volumes-stuck", 2)
	f.deploymentOf(2, "900m")
	victim := f.startDrain()
	f.attach("sd-volumes-stuck-web", victim)
	f.clk.Step(3 * time.Minute)
	f.drainUntilEmptied(victim)

	f.clk.Step(4 * time.Minute)
	if res := f.run(); f.node(victim) == nil || len(res.GivenUp) > 0 {
		t.Fatalf("4 minutes into the wait: node gone or given up (removed %v, given up %v); want %s waiting", res.Removed, res.GivenUp, victim)
	}
	f.clk.Step(2 * time.Minute)
	res := f.run()
	if !slices.Contains(res.Removed, victim) {
		t.Fatalf("past the drain timeout of the wait: removed %v, given up %v; want %s removed", res.Removed, res.GivenUp, victim)
	}
	if msg := f.said(victim, disruption.ReasonVolumesStillAttached); !strings.Contains(msg, "sd-volumes-stuck-web") {
		t.Errorf("no %s warning naming the volume on %s: %+v", disruption.ReasonVolumesStillAttached, victim, f.events.For(victim))
	}
}

// TestAnInterruptedNodeWaitsForItsVolumesUntilItsDeadline: a node under
// an interruption notice whose pod moved still has the pod's volume
// attached: it is removed once the volume detaches, or at its deadline
// if the volume does not.
func TestAnInterruptedNodeWaitsForItsVolumesUntilItsDeadline(t *testing.T) {
	f := setup(t, "sd-volumes-spot", 2)
	f.deploymentOf(1, "900m")
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(f.ns), client.MatchingLabels{"app": "web"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of web: %d, %v", len(pods.Items), err)
	}
	victim := pods.Items[0].Spec.NodeName
	deadline := f.clk.Now().Add(2 * time.Minute)
	f.attach("sd-volumes-spot-web", victim)
	f.patchNode(victim, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintInterruption, Effect: corev1.TaintEffectNoSchedule})
		n.Annotations[v1alpha1.AnnotationInterruptionDeadline] = deadline.UTC().Format(time.RFC3339)
	})
	f.tolerantRun() // starts its drain
	f.drainUntilEmptied(victim)
	if f.node(victim) == nil {
		t.Fatalf("node %s removed before its deadline while the volume of its pod is attached", victim)
	}
	if msg := f.said(victim, disruption.ReasonAwaitingVolumeDetachment); !strings.Contains(msg, "sd-volumes-spot-web") {
		t.Errorf("no %s event naming the volume on %s: %+v", disruption.ReasonAwaitingVolumeDetachment, victim, f.events.For(victim))
	}
	f.clk.SetTime(deadline)
	f.removedWithin(victim, 30*time.Second)
}

// TestAPodLongTerminatingDoesNotSkipTheWaitForVolumes: the evicted pod
// of a drained node does not finish shutting down (a finalizer holds
// it); once it is long terminating it goes with the node, and the
// node's removal still waits for the volume of its pod to detach, the
// drain timeout from then.
func TestAPodLongTerminatingDoesNotSkipTheWaitForVolumes(t *testing.T) {
	f := setup(t, "sd-volumes-held", 2)
	f.heldDeployment("web", "900m", 10)
	f.waitRunning(2)
	victim := f.startDrain()
	f.attach("sd-volumes-held-web", victim)
	f.clk.Step(10 * time.Second)
	f.run() // evicts its pod
	f.shuttingDownOn(victim, "web", 1)
	f.clk.Step(2 * time.Minute) // past its grace period and 30 s: long terminating
	for range 4 {
		f.run()
		if f.node(victim) == nil {
			t.Fatalf("node %s removed while the volume of its pod is attached", victim)
		}
		f.clk.Step(time.Minute)
	}
	if msg := f.said(victim, disruption.ReasonAwaitingVolumeDetachment); !strings.Contains(msg, "sd-volumes-held-web") {
		t.Errorf("no %s event naming the volume on %s: %+v", disruption.ReasonAwaitingVolumeDetachment, victim, f.events.For(victim))
	}
}

// failingDelete is a cloud whose removals fail while fail is set (an
// API throttled for a while).
type failingDelete struct {
	cloudprovider.CloudProvider
	fail bool
}

func (c *failingDelete) Delete(ctx context.Context, node string) error {
	if c.fail {
		return errors.New("rate exceeded")
	}
	return c.CloudProvider.Delete(ctx, node)
}

// TestAVolumeThatDetachesLateLeavesTheProviderItsTime: the volume
// detaches near the end of the wait and the provider then fails to
// remove the node for two minutes: the drain is not given up (the
// removal has the drain timeout from the end of the wait), and the node
// goes once the provider can remove it.
func TestAVolumeThatDetachesLateLeavesTheProviderItsTime(t *testing.T) {
	f := setup(t, "sd-volumes-late", 2)
	cloud := &failingDelete{CloudProvider: f.ctrl.Cloud}
	f.ctrl.Cloud = cloud
	f.deploymentOf(2, "900m")
	victim := f.startDrain()
	va := f.attach("sd-volumes-late-web", victim)
	f.drainUntilEmptied(victim)
	f.clk.Step(4*time.Minute + 50*time.Second)
	f.run()
	if err := env.Client.Delete(context.Background(), va); err != nil {
		t.Fatal(err)
	}
	cloud.fail = true
	_, _ = f.ctrl.RunOnce(context.Background())
	f.clk.Step(2 * time.Minute)
	res, _ := f.ctrl.RunOnce(context.Background())
	if n := f.node(victim); len(res.GivenUp) > 0 || n == nil || !tainted(n) {
		t.Fatalf("2 minutes after the volume detached, the provider failing: given up %v; want %s still draining", res.GivenUp, victim)
	}
	cloud.fail = false
	if res := f.run(); !slices.Contains(res.Removed, victim) {
		t.Fatalf("removed %v once the provider can, want %s", res.Removed, victim)
	}
}

// TestADrainABlockingPodStopsSaysNothingOfVolumes: a pod of the draining
// node opts out (do-not-disrupt) while a volume is attached there: the
// drain stops and says why, without first saying the node's pods are
// gone and its removal waits for their volumes (a blocked drain's pods
// were taken for gone).
func TestADrainABlockingPodStopsSaysNothingOfVolumes(t *testing.T) {
	f := setup(t, "sd-volumes-blocked", 2)
	f.deploymentOf(2, "900m")
	victim := f.startDrain()
	f.attach("sd-volumes-blocked-web", victim)
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(f.ns), client.MatchingFields{"spec.nodeName": victim}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no pod on %s", victim)
	}
	p := &pods.Items[0]
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[v1alpha1.AnnotationDoNotDisrupt] = "true"
	if err := env.Client.Patch(context.Background(), p, patch); err != nil {
		t.Fatal(err)
	}
	res := f.run()
	if !slices.Contains(res.GivenUp, victim) {
		t.Fatalf("given up %v, want %s stopped by its pod", res.GivenUp, victim)
	}
	if msg := f.said(victim, disruption.ReasonAwaitingVolumeDetachment); msg != "" {
		t.Errorf("a drain a pod stopped said %q", msg)
	}
}
