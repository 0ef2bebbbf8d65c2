package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/config/demo"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// tenantCLI runs `berth tenant ARGS` against the cluster as its admin.
func tenantCLI(args ...string) (string, error) {
	return berth(append([]string{"tenant", "--kubeconfig", env.Cluster.KubeconfigPath()}, args...)...)
}

// demoTenantTypes creates the TenantTypes `berth dev demo` installs and
// deletes them when the test ends.
func demoTenantTypes(t *testing.T) {
	t.Helper()
	data, err := demo.Files.ReadFile("tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		tt := &v1alpha1.TenantType{}
		if err := dec.Decode(tt); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(context.Background(), tt); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tt) })
	}
}

// createTenants runs `berth tenant create NAME --type TYPE --wait` for
// each name at once and returns each one's output and error.
func createTenants(typeOf map[string]string, timeout time.Duration) (map[string]string, map[string]error) {
	var mu sync.Mutex
	outs, errs := map[string]string{}, map[string]error{}
	var wg sync.WaitGroup
	for name, typ := range typeOf {
		wg.Go(func() {
			out, err := tenantCLI("create", name, "--type", typ, "--set", "OWNER="+name, "--wait", "--timeout", timeout.String())
			mu.Lock()
			defer mu.Unlock()
			outs[name], errs[name] = out, err
		})
	}
	wg.Wait()
	return outs, errs
}

// checkTenantsRun checks that each tenant runs on a node of its type's
// group, one tenant per node, and returns the nodes by tenant.
func checkTenantsRun(t *testing.T, groupOf map[string]string) map[string]string {
	t.Helper()
	nodes := map[string]string{}
	owner := map[string]string{}
	for name, group := range groupOf {
		ten := &v1alpha1.Tenant{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, ten); err != nil {
			t.Fatal(err)
		}
		st := ten.Status
		if st.Phase != v1alpha1.TenantRunning || st.NodeGroup != group || st.NodeName == "" {
			t.Errorf("tenant %s: phase %s on node %q of group %q; want Running on a node of %s", name, st.Phase, st.NodeName, st.NodeGroup, group)
		}
		if other, taken := owner[st.NodeName]; taken {
			t.Errorf("tenants %s and %s share node %s", name, other, st.NodeName)
		}
		owner[st.NodeName], nodes[name] = name, st.NodeName
		pods := &corev1.PodList{}
		if err := env.Client.List(context.Background(), pods, client.InNamespace(ten.Status.Namespace)); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != st.NodeName || pods.Items[0].Status.Phase != corev1.PodRunning {
			t.Errorf("tenant %s: want its one pod Running on %s, have %d pods", name, st.NodeName, len(pods.Items))
		}
	}
	return nodes
}

// tableRows maps the first column of each line of a table to the line
// with its columns separated by one space.
func tableRows(out string) map[string]string {
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	return rows
}

// TestTenantWorkflowOfReference001: the multi-tenant workflow of reference
// 001 with `berth tenant`: groups large (4 cpu/16Gi, max 3) and medium
// (2 cpu/4Gi, max 5) from zero; four tenants created at once get two large
// and two medium nodes, one tenant per node; a third premium tenant gets
// the third large node, a fourth waits and says the group is at its
// maximum; bad input creates nothing; deleting every tenant brings both
// groups back to zero.
func TestTenantWorkflowOfReference001(t *testing.T) {
	ctx := context.Background()
	begin := time.Now()
	group := func(name, instanceType, cpu, mem string, maxSize int32) *v1alpha1.NodeGroup {
		ng := b.NodeGroup(name, b.Size(0, maxSize), b.TemplateLabel("size", name), b.TemplateTaint("size", name, corev1.TaintEffectNoSchedule),
			b.InstanceType(instanceType, cpu, mem, b.OnDemand("zone-a", "0.10")))
		ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 2 * time.Second}
		return ng
	}
	createNodeGroup(t, group("large", "t3a.xlarge", "4", "16Gi", 3))
	createNodeGroup(t, group("medium", "t3a.medium", "2", "4Gi", 5))
	demoTenantTypes(t)
	t.Cleanup(func() { _ = env.Client.DeleteAllOf(ctx, &v1alpha1.Tenant{}) })
	startController(t, "--scale-down-interval=1s")

	out, err := tenantCLI("types")
	if types := tableRows(out); err != nil || !strings.HasPrefix(types["premium"], "premium large true cpu=3,memory=12Gi") ||
		!strings.HasPrefix(types["standard"], "standard medium true cpu=1500m,memory=3Gi") {
		t.Errorf("berth tenant types: %v\n%s", err, out)
	}

	// Bad input: a clear error, nothing created.
	orphan := &v1alpha1.TenantType{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Spec: v1alpha1.TenantTypeSpec{NodeGroup: "xlarge",
		Template: v1alpha1.TenantTemplate{Image: "registry.k8s.io/pause:3.10"}}}
	if err := env.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, orphan) })
	taken := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-taken"}}
	if err := env.Client.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, taken) })
	for _, bad := range []struct{ name, typ, want string }{
		{"gold-1", "gold", `tenant type "gold" does not exist; known types: orphan, premium, standard`},
		{"orphan-1", "orphan", `tenant type orphan runs on node group "xlarge", which does not exist`},
		{"Premium_1", "premium", `tenant name "Premium_1" is not a DNS label`},
		{"taken", "standard", "namespace tenant-taken already exists and is not a tenant's"},
	} {
		out, err := tenantCLI("create", bad.name, "--type", bad.typ)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("berth tenant create %s --type %s: %v\n%s\nwant an error saying %q", bad.name, bad.typ, err, out, bad.want)
		}
	}
	if list := (&v1alpha1.TenantList{}); env.Client.List(ctx, list) != nil || len(list.Items) != 0 {
		t.Fatalf("bad input created %d tenants", len(list.Items))
	}

	// Four tenants at once: two large and two medium nodes, one each.
	start := time.Now()
	outs, errs := createTenants(map[string]string{"standard-1": "standard", "standard-2": "standard", "premium-1": "premium", "premium-2": "premium"}, 3*time.Minute)
	for name, err := range errs {
		if err != nil || !strings.Contains(outs[name], "tenant "+name+" runs on node") {
			t.Fatalf("berth tenant create %s --wait: %v\n%s", name, err, outs[name])
		}
	}
	t.Logf("four tenants Running %s after `berth tenant create --wait`; premium-1 printed:\n%s", time.Since(start).Round(time.Second), outs["premium-1"])
	checkTenantsRun(t, map[string]string{"standard-1": "medium", "standard-2": "medium", "premium-1": "large", "premium-2": "large"})
	if l, m := len(liveNodes(t, "large")), len(liveNodes(t, "medium")); l != 2 || m != 2 {
		t.Errorf("%d large and %d medium nodes for two premium and two standard tenants, want 2 and 2", l, m)
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-premium-1", Name: "premium-1-config"}, cm); err != nil ||
		cm.Data["PLAN"] != "premium" || cm.Data["OWNER"] != "premium-1" {
		t.Errorf("premium-1's configuration: %v %v; want the type's PLAN and its own OWNER", err, cm.Data)
	}
	if out, err := tenantCLI("create", "premium-1", "--type", "premium"); err == nil || !strings.Contains(out, "tenant premium-1 already exists (type premium, phase Running)") {
		t.Errorf("creating premium-1 again: %v\n%s", err, out)
	}

	// premium-3 gets the third large node; premium-4 cannot have a fourth.
	outs, errs = createTenants(map[string]string{"premium-3": "premium"}, 2*time.Minute)
	if errs["premium-3"] != nil {
		t.Fatalf("premium-3: %v\n%s", errs["premium-3"], outs["premium-3"])
	}
	checkTenantsRun(t, map[string]string{"premium-3": "large"})
	const atMax = "large: node group at maxSize 3"
	outs, errs = createTenants(map[string]string{"premium-4": "premium"}, 45*time.Second)
	if errs["premium-4"] == nil || !strings.Contains(outs["premium-4"], "timed out after 45s") || !strings.Contains(outs["premium-4"], atMax) {
		t.Errorf("premium-4 --wait: %v\n%s\nwant a timeout saying %q", errs["premium-4"], outs["premium-4"], atMax)
	}
	t.Logf("premium-4 --wait printed:\n%s", outs["premium-4"])
	p4 := &v1alpha1.Tenant{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "premium-4"}, p4); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(p4.Status.Conditions, v1alpha1.ConditionScheduled); p4.Status.Phase != v1alpha1.TenantPending ||
		c == nil || c.Reason != v1alpha1.ReasonNoNodeCanBeLaunched || !strings.Contains(c.Message, atMax) {
		t.Errorf("premium-4: phase %s, Scheduled %+v; want Pending, NoNodeCanBeLaunched, %q", p4.Status.Phase, c, atMax)
	}
	if l := len(liveNodes(t, "large")); l != 3 {
		t.Errorf("%d large nodes, want 3 (its maxSize)", l)
	}
	out, err = tenantCLI("list")
	t.Logf("berth tenant list:\n%s", out)
	rows := tableRows(out)
	if err != nil || rows["NAME"] != "NAME TYPE PHASE NODE NODE GROUP AGE" || strings.Count(out, "Running") != 5 ||
		!strings.HasPrefix(rows["premium-4"], "premium-4 premium Pending <none> <none>") || !strings.HasPrefix(rows["premium-3"], "premium-3 premium Running large-") {
		t.Errorf("berth tenant list: %v\n%s", err, out)
	}

	// Every tenant goes: its pod and namespace, then its node. delete
	// --wait returns when the nodes of the five that had one are gone too.
	// premium-4 goes first, while every large node is taken: deleted with
	// the others, its pod could take the node of a premium tenant deleted
	// before it, and it would go with a node.
	start = time.Now()
	out, err = tenantCLI("delete", "--wait", "--timeout", "3m", "premium-4")
	if err != nil || strings.Contains(out, "and its node") || !strings.Contains(out, "tenant premium-4 is gone") {
		t.Fatalf("berth tenant delete --wait premium-4: %v\n%s", err, out)
	}
	names := []string{"standard-1", "standard-2", "premium-1", "premium-2", "premium-3"}
	out, err = tenantCLI(append([]string{"delete", "--wait", "--timeout", "3m"}, names...)...)
	if err != nil || strings.Count(out, "and its node") != 5 {
		t.Fatalf("berth tenant delete --wait: %v\n%s", err, out)
	}
	names = append(names, "premium-4")
	t.Logf("six tenants, their pods and their nodes gone %s after `berth tenant delete --wait`", time.Since(start).Round(time.Second))
	for _, name := range names {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "tenant-" + name}, &corev1.Namespace{}); err == nil {
			t.Errorf("namespace tenant-%s is still there", name)
		}
	}
	start = time.Now()
	expect.Eventually(t, 3*time.Minute, func(context.Context) (bool, string, error) {
		l, m := len(liveNodes(t, "large")), len(liveNodes(t, "medium"))
		return l == 0 && m == 0, fmt.Sprintf("%d large and %d medium nodes left", l, m), nil
	})
	t.Logf("both groups back to zero %s after the tenants were gone; whole workflow %s", time.Since(start).Round(time.Second), time.Since(begin).Round(time.Second))
}

// TestBerthWritesTenantObjectsOnlyInTenantNamespaces: berth's RBAC lets it
// create namespaces, ConfigMaps, Services and Deployments for tenants
// anywhere; the admission policy keeps those writes in tenant-<name>
// namespaces (and Deployments in berth-system).
func TestBerthWritesTenantObjectsOnlyInTenantNamespaces(t *testing.T) {
	ctx := context.Background()
	berth := asController(t)
	cm := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "berth-policy-probe"}}
	}
	// The policy takes effect once the API server's policy cache has it.
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := berth.Create(ctx, cm("default"))
		if err == nil {
			_ = env.Client.Delete(ctx, cm("default"))
			return false, "berth could create a ConfigMap in default", nil
		}
		return strings.Contains(err.Error(), "only of tenants"), fmt.Sprintf("berth creating a ConfigMap in default: %v", err), nil
	})
	if err := berth.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-a-tenant"}}); err == nil || !strings.Contains(err.Error(), "only of tenants") {
		_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-a-tenant"}})
		t.Errorf("berth creating namespace not-a-tenant: %v, want denied by the policy", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-policy-probe"}}
	if err := berth.Create(ctx, ns); err != nil {
		t.Fatalf("berth creating a tenant namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	if err := berth.Create(ctx, cm(ns.Name)); err != nil {
		t.Errorf("berth creating a ConfigMap in a tenant namespace: %v", err)
	}
}
