package install

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

const (
	workloadNS = "install-test"
	group      = "general"
)

// provisionAPod: a pod no node can hold gets a node of the group berth
// launched for it, and runs.
func provisionAPod(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS}}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, b.NodeGroup(group, b.InstanceType("standard-2", "2", "4Gi", b.OnDemand("zone-a", "0.1")))); err != nil {
		t.Fatal(err)
	}
	pod := b.Pod("web", b.Namespace(workloadNS), b.NoUID(), b.CPU("500m"), b.Memory("512Mi"), b.NodeSelector(v1alpha1.LabelNodeGroup, group))
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprintf("pod %s on %q", pod.Status.Phase, pod.Spec.NodeName), nil
	})
	node := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[v1alpha1.LabelNodeGroup] != group || node.Annotations[v1alpha1.AnnotationLaunchedBy] == "" {
		t.Errorf("the pod runs on %s (labels %v), not on a node berth launched for group %s", node.Name, node.Labels, group)
	}
	t.Logf("pending pod -> Running on %s, launched by berth, in %s", node.Name, time.Since(start).Round(time.Millisecond))
}

// keepPlaceholders: a Headroom that holds its unit with placeholder pods
// gets its placeholder Deployment in berth-system, owned by the
// Headroom. The API server runs OwnerReferencesPermissionEnforcement (as
// OpenShift does): berth, as the chart's ServiceAccount, sets
// blockOwnerDeletion only if the chart lets it update the Headroom's
// finalizers; without that right the Deployment is refused and the
// Headroom keeps no headroom.
func keepPlaceholders(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "install-spare"}, Spec: v1alpha1.HeadroomSpec{
		Scope:        v1alpha1.HeadroomScope{NodeGroups: []string{group}},
		Placeholders: true,
		Units: &v1alpha1.HeadroomUnits{Count: 1, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
	if err := cl.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), h) })
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		err := cl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "headroom-" + h.Name}, d)
		if apierrors.IsNotFound(err) {
			got := &v1alpha1.Headroom{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(h), got); err != nil {
				return false, "", err
			}
			return false, fmt.Sprintf("no placeholder Deployment; the Headroom's conditions: %+v", got.Status.Conditions), nil
		}
		if err != nil {
			return false, "", err
		}
		owner := metav1.GetControllerOf(d)
		return owner != nil && owner.Kind == "Headroom" && owner.Name == h.Name, fmt.Sprintf("owner %v", owner), nil
	})
}

// checkControllerPodsPlaced: given two ordinary nodes besides the one
// berth launched, the scheduler puts the chart's two replicas one on each
// ordinary node (anti-affinity), none on berth's node (node affinity).
func checkControllerPodsPlaced(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	plain := sets.New("plain-1", "plain-2")
	for _, name := range sets.List(plain) {
		node := b.Node(name, "4", "16Gi", b.KWOK(), b.NodeLabels(corev1.LabelOSStable, "linux"))
		if err := cl.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Delete(context.Background(), node) })
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, "", err
		}
		on := sets.New[string]()
		var where []string
		for _, p := range pods.Items {
			on.Insert(p.Spec.NodeName)
			where = append(where, p.Name+" on "+p.Spec.NodeName)
		}
		return len(pods.Items) == 2 && on.Equal(plain), fmt.Sprintf("controller pods: %v, want one on each of %v", where, sets.List(plain)), nil
	})
}

// checkLeader: berth holds its lease in its namespace (the chart's Role).
func checkLeader(t *testing.T) {
	t.Helper()
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		lease := &coordinationv1.Lease{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "berth-controller"}, lease); err != nil {
			return false, err.Error(), nil
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", "lease has no holder", nil
	})
}

// checkMetrics: the metrics endpoint, HTTPS as the chart configures it,
// answers the ServiceAccount bound to the chart's metrics reader and
// refuses anonymous callers.
func checkMetrics(t *testing.T, addr string) {
	t.Helper()
	tr, err := env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), prometheus, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The controller's certificate is self-signed (as the chart's
	// ServiceMonitor says); this checks who may read, not the certificate.
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test endpoint
	status := func(ctx context.Context, bearer string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		code, err := status(ctx, tr.Status.Token)
		return code == http.StatusOK, fmt.Sprintf("Prometheus' account got %d (%v)", code, err), nil
	})
	if code, err := status(context.Background(), ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("anonymous /metrics: %d %v, want 401", code, err)
	}
}

// cleanupWorkload removes the test's pod, node group and nodes (as the
// admin: berth is stopped).
func cleanupWorkload(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS}},
		&v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: group}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: prometheus, Namespace: ns}},
	} {
		if err := cl.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	}
	if err := cl.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: group}); err != nil {
		t.Error(err)
	}
}
