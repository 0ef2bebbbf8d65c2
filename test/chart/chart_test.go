// Package chart checks berth's Helm chart as rendered by the pinned Helm:
// it lints clean, deploys the controller with the production defaults the
// issue asks for, exposes every controller flag as a value, and carries
// exactly the RBAC, admission policies, PriorityClasses and CRDs of
// config/.
package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/testing/helmchart"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs Helm")
	}
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func render(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helmchart.Render(context.Background(), repoRoot(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the rendered object of that kind and name, or fails.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("the chart renders no %s %s", kind, name)
	return nil
}

func convert[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	return convert[appsv1.Deployment](t, find(t, objs, "Deployment", "berth-controller"))
}

func TestHelmLintIsClean(t *testing.T) {
	root := repoRoot(t)
	out, err := helmchart.Helm(context.Background(), root, "lint", "--strict", helmchart.Chart, "--namespace", helmchart.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Errorf("helm lint:\n%s", out)
	}
}

// TestDeploymentIsProductionReady: two replicas that elect a leader, on
// different nodes and never on nodes berth launched, as critical pods that
// are not evicted before the workloads, non-root on a read-only file
// system with no capabilities, with probes, memory sized from the
// measurement, and a budget that never drains both.
func TestDeploymentIsProductionReady(t *testing.T) {
	objs := render(t)
	d := deployment(t, objs)
	spec := d.Spec.Template.Spec
	if r := d.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("replicas %s, want 2", ptrString(r))
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q, want system-cluster-critical", spec.PriorityClassName)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Args[0] != "controller" || !slices.Contains(c.Args, "--leader-elect=true") || !slices.Contains(c.Args, "--leader-election-namespace=berth-system") {
		t.Errorf("args %q: want `controller --leader-elect=true --leader-election-namespace=berth-system ...`", c.Args)
	}
	if !slices.Contains(c.Args, "--metrics-secure=true") || !slices.Contains(c.Args, "--metrics-bind-address=:8443") {
		t.Errorf("args %q: want HTTPS metrics on :8443", c.Args)
	}

	// The replicas spread over zones (ScheduleAnyway: one zone still runs
	// them all), and the user's constraints come after.
	if ts := spec.TopologySpreadConstraints; len(ts) != 1 || ts[0].TopologyKey != corev1.LabelTopologyZone ||
		ts[0].WhenUnsatisfiable != corev1.ScheduleAnyway || ts[0].LabelSelector == nil ||
		!cmp.Equal(ts[0].LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("topology spread %+v, want the replicas spread over zones, ScheduleAnyway", ts)
	}
	if ts := deployment(t, render(t, "--set", "affinity.zoneSpread=false")).Spec.Template.Spec.TopologySpreadConstraints; len(ts) != 0 {
		t.Errorf("zoneSpread=false: topology spread %+v, want none", ts)
	}
	// A user's own zone spread replaces it (two constraints on one key and
	// whenUnsatisfiable may be refused, failing an upgrade).
	own := deployment(t, render(t, "--set", "topologySpreadConstraints[0].maxSkew=2,topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,"+
		"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway")).Spec.Template.Spec.TopologySpreadConstraints
	if len(own) != 1 || own[0].MaxSkew != 2 {
		t.Errorf("with the user's zone spread: %+v, want only the user's", own)
	}

	anti := spec.Affinity.PodAntiAffinity
	if anti == nil || len(anti.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("pod anti-affinity %+v, want one required term", anti)
	}
	term := anti.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != corev1.LabelHostname || term.LabelSelector == nil {
		t.Errorf("anti-affinity term %+v, want one replica per hostname", term)
	} else if diff := cmp.Diff(d.Spec.Selector.MatchLabels, term.LabelSelector.MatchLabels); diff != "" {
		t.Errorf("anti-affinity does not select the replicas (-selector +term):\n%s", diff)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("pod template label %s=%q, the selector wants %q", k, d.Spec.Template.Labels[k], v)
		}
	}
	na := spec.Affinity.NodeAffinity
	if na == nil || na.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		!slices.ContainsFunc(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == v1alpha1.LabelNodeGroup && r.Operator == corev1.NodeSelectorOpDoesNotExist
		}) {
		t.Errorf("node affinity %+v: want the controller kept off nodes berth launched (%s DoesNotExist)", na, v1alpha1.LabelNodeGroup)
	}

	psc, sc := spec.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("pod security context %+v: want runAsNonRoot", psc)
	case psc.RunAsUser == nil || *psc.RunAsUser != 65532:
		t.Errorf("runAsUser %v, want the image's nonroot user 65532", psc.RunAsUser)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp %+v, want RuntimeDefault", psc.SeccompProfile)
	}
	switch {
	case sc == nil:
		t.Fatal("no container security context")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("the root file system is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation is allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want all dropped and none added", sc.Capabilities)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes %+v %+v, want /healthz and /readyz", c.LivenessProbe, c.ReadinessProbe)
	}
	// e2e-scale measured a peak of 74-76 MiB: the request must cover it.
	if mem := c.Resources.Requests.Memory(); mem.Cmp(resourceMiB(76)) < 0 {
		t.Errorf("memory request %s is below the measured peak of 76Mi", mem)
	}
	if lim := c.Resources.Limits.Memory(); lim.Cmp(*c.Resources.Requests.Memory()) < 0 {
		t.Errorf("memory limit %s below the request", lim)
	}
	if got := memoryLimits(c); len(got) != 1 || got[0].Name != "BERTH_MEMORY_LIMIT" || got[0].ValueFrom == nil || got[0].ValueFrom.ResourceFieldRef == nil ||
		got[0].ValueFrom.ResourceFieldRef.Resource != "limits.memory" || got[0].ValueFrom.ResourceFieldRef.ContainerName != c.Name {
		t.Errorf("memory limit variables %+v: want BERTH_MEMORY_LIMIT once, from the container's memory limit (the controller holds its heap under 90 %% of it)", got)
	}

	pdb := convert[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", "berth-controller"))
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if diff := cmp.Diff(d.Spec.Selector, pdb.Spec.Selector); diff != "" {
		t.Errorf("the PDB does not select the replicas:\n%s", diff)
	}
	svc := convert[corev1.Service](t, find(t, objs, "Service", "berth-controller-metrics"))
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" || svc.Spec.Ports[0].Port != 8443 {
		t.Errorf("metrics Service ports %+v, want 8443 -> the metrics port", svc.Spec.Ports)
	}
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, svc.Spec.Selector); diff != "" {
		t.Errorf("the metrics Service does not select the replicas:\n%s", diff)
	}
}

// TestEveryControllerFlagIsAValue: the Deployment passes every flag of
// `berth controller` (except --kubeconfig: in a cluster it uses its
// ServiceAccount), the rendered arguments parse, and the chart's defaults
// are the controller's except the deliberate differences listed here.
func TestEveryControllerFlagIsAValue(t *testing.T) {
	c := deployment(t, render(t)).Spec.Template.Spec.Containers[0]
	cmd := newControllerCommand()
	if err := cmd.ParseFlags(c.Args[1:]); err != nil {
		t.Fatalf("the controller rejects the chart's arguments: %v", err)
	}
	passed := sets.New[string]()
	for _, a := range c.Args[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		passed.Insert(name)
	}
	differs := map[string]string{}
	for _, f := range allFlags(cmd) {
		if f.Name == "kubeconfig" || f.Name == "help" {
			continue
		}
		if !passed.Has(f.Name) {
			t.Errorf("--%s is not set by the chart: add a value for it to values.yaml and templates/deployment.yaml", f.Name)
		}
		if f.Value.String() != f.DefValue {
			differs[f.Name] = f.Value.String()
		}
	}
	want := map[string]string{"zap-time-encoding": "rfc3339", "zap-encoder": "json", "zap-log-level": "info", "zap-stacktrace-level": "error"}
	if diff := cmp.Diff(want, differs); diff != "" {
		t.Errorf("flags where the chart's default differs from the controller's (-expected +got):\n%s", diff)
	}
}

// TestRenamedRelease: another fullname and ServiceAccount name reach the
// bindings and the admission policies' user name, and the lease name (the
// controller's leader-election ID) stays.
func TestRenamedRelease(t *testing.T) {
	objs := render(t, "--set", "fullnameOverride=acme-berth,serviceAccount.name=acme")
	user := "system:serviceaccount:berth-system:acme"
	for _, name := range []string{"berth-changes-only-its-nodes", "berth-creates-only-kwok-nodes", "berth-node-owner-mark", "berth-changes-only-its-part-of-pods",
		"berth-runs-only-placeholders-in-its-namespace", "berth-writes-only-tenant-namespaces", "berth-writes-only-its-webhook"} {
		p := find(t, objs, "ValidatingAdmissionPolicy", name)
		conds, _, _ := unstructured.NestedSlice(p.Object, "spec", "matchConditions")
		if len(conds) == 0 || !strings.Contains(fmt.Sprint(conds[0]), "'"+user+"'") || strings.Contains(fmt.Sprint(conds), "berth-controller") {
			t.Errorf("policy %s matches %v, want the user %s first and no other", name, conds, user)
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		b := find(t, objs, kind, "acme-berth")
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "acme" {
			t.Errorf("%s subjects %v, want the ServiceAccount acme", kind, subjects)
		}
	}
	find(t, objs, "ServiceAccount", "acme")
	role := find(t, objs, "Role", "acme-berth")
	if !strings.Contains(fmt.Sprint(role.Object["rules"]), "resourceNames:[berth-controller]") {
		t.Errorf("the Role no longer grants the lease berth-controller: %v", role.Object["rules"])
	}
	if d := deployment(t, render(t, "--set", "affinity.podAntiAffinity=preferred,replicas=3")); d.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution == nil || *d.Spec.Replicas != 3 {
		t.Errorf("podAntiAffinity=preferred, replicas=3 gave %+v, %v", d.Spec.Template.Spec.Affinity.PodAntiAffinity, *d.Spec.Replicas)
	}
}

// TestRefusals: the chart refuses another namespace (berth keeps its pods
// in berth-system) and values the schema rejects.
func TestRefusals(t *testing.T) {
	root := repoRoot(t)
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"another namespace", []string{"--namespace", "default"}, "must be installed in the namespace berth-system"},
		{"a malformed duration", []string{"--namespace", helmchart.Namespace, "--set", "controller.resyncPeriod=soon"}, "resyncPeriod"},
		{"an unknown value", []string{"--namespace", helmchart.Namespace, "--set", "controler.scaleDown=false"}, "controler"},
		{"zero replicas", []string{"--namespace", helmchart.Namespace, "--set", "replicas=0"}, "replicas"},
		{"a name its Services' names would pass 63 characters with", []string{"--namespace", helmchart.Namespace, "--set",
			"fullnameOverride=" + strings.Repeat("b", 60)}, "fullnameOverride"},
		{"a name that is no DNS label", []string{"--namespace", helmchart.Namespace, "--set", "fullnameOverride=Berth_Controller"}, "fullnameOverride"},
		// The admission policy would refuse berth's webhook configuration.
		{"a webhook URL that is not loopback", []string{"--namespace", helmchart.Namespace, "--set", "webhook.url=https://berth.example.com:9443"}, "url"},
		{"two replicas without leader election", []string{"--namespace", helmchart.Namespace, "--set", "controller.leaderElect=false"}, "replicas"},
		{"a lease outside berth-system", []string{"--namespace", helmchart.Namespace, "--set", "controller.leaderElection.namespace=kube-system"}, "namespace"},
		{"a PodDisruptionBudget that allows no eviction", []string{"--namespace", helmchart.Namespace, "--set", "podDisruptionBudget.maxUnavailable=0"}, "maxUnavailable"},
		{"a kubeconfig Secret without its key", []string{"--namespace", helmchart.Namespace, "--set", "controller.clusterAPI.kubeconfigSecret.name=mgmt"}, "key"},
		{"a kubeconfig path and a kubeconfig Secret", []string{"--namespace", helmchart.Namespace, "--set", "controller.clusterAPI.kubeconfig=/x",
			"--set", "controller.clusterAPI.kubeconfigSecret.name=mgmt", "--set", "controller.clusterAPI.kubeconfigSecret.key=value"}, "not both"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helmchart.Helm(context.Background(), root, append([]string{"template", "berth", helmchart.Chart}, tt.args...)...)
			if err == nil || !strings.Contains(out, tt.wantErr) {
				t.Errorf("helm template %v: %v, want an error mentioning %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

// TestOptionalObjects: plain metrics bind loopback only and get no
// Service; the critical-pods quota admits the Deployment's priority class.
func TestOptionalObjects(t *testing.T) {
	objs := render(t, "--set", "metrics.secure=false")
	if args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--metrics-bind-address=127.0.0.1:8443") {
		t.Errorf("args %q: plain metrics must bind 127.0.0.1 (the controller refuses otherwise)", args)
	}
	if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Service" && strings.HasSuffix(o.GetName(), "-metrics")
	}) {
		t.Error("a metrics Service for plain-HTTP metrics on loopback")
	}
	if slices.ContainsFunc(render(t), func(o *unstructured.Unstructured) bool { return o.GetKind() == "ResourceQuota" }) {
		t.Error("a ResourceQuota is rendered by default")
	}
	q := convert[corev1.ResourceQuota](t, find(t, render(t, "--set", "criticalPodsQuota.create=true"), "ResourceQuota", "berth-controller-critical-pods"))
	if q.Spec.ScopeSelector == nil || len(q.Spec.ScopeSelector.MatchExpressions) != 1 ||
		!slices.Equal(q.Spec.ScopeSelector.MatchExpressions[0].Values, []string{"system-cluster-critical"}) || q.Spec.Hard.Pods().Value() < 2 {
		t.Errorf("critical pods quota %+v, want at least 2 pods of system-cluster-critical", q.Spec)
	}
}

// TestClusterAPIKubeconfigSecret: the management cluster's kubeconfig, in
// a Secret, is mounted read-only and is the controller's
// --clusterapi-kubeconfig.
func TestClusterAPIKubeconfigSecret(t *testing.T) {
	d := deployment(t, render(t, "--set", "controller.clusterAPI.enabled=true", "--set", "controller.clusterAPI.kubeconfigSecret.name=mgmt",
		"--set", "controller.clusterAPI.kubeconfigSecret.key=value"))
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if !slices.Contains(c.Args, "--clusterapi-kubeconfig=/etc/berth/clusterapi/value") {
		t.Errorf("args %q, want --clusterapi-kubeconfig=/etc/berth/clusterapi/value", c.Args)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == "/etc/berth/clusterapi" && m.ReadOnly && m.Name == "clusterapi-kubeconfig"
	}) {
		t.Errorf("mounts %+v, want clusterapi-kubeconfig read-only at /etc/berth/clusterapi", c.VolumeMounts)
	}
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == "clusterapi-kubeconfig" && v.Secret != nil && v.Secret.SecretName == "mgmt" &&
			len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "value" && v.Secret.Items[0].Path == "value"
	}) {
		t.Errorf("volumes %+v, want the Secret mgmt's key value", spec.Volumes)
	}
	if err := newControllerCommand().ParseFlags(c.Args[1:]); err != nil {
		t.Errorf("the controller rejects the arguments: %v", err)
	}
}

// TestServiceMonitor: when enabled, Prometheus scrapes the HTTPS port with
// its token.
func TestServiceMonitor(t *testing.T) {
	if slices.ContainsFunc(render(t), func(o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceMonitor" }) {
		t.Error("a ServiceMonitor is rendered by default (it needs prometheus-operator's CRD)")
	}
	sm := find(t, render(t, "--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor", "berth-controller")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["scheme"] != "https" || eps[0].(map[string]any)["port"] != "https-metrics" || eps[0].(map[string]any)["bearerTokenFile"] == nil {
		t.Errorf("ServiceMonitor endpoints %v, want https-metrics over HTTPS with a bearer token", eps)
	}
	// A Prometheus that denies file access from ServiceMonitors skips one
	// with bearerTokenFile: the endpoint's authorization from a Secret.
	sm = find(t, render(t, "--set", "metrics.serviceMonitor.enabled=true", "--set-json",
		`metrics.serviceMonitor.authorization={"credentials":{"name":"prometheus-token","key":"token"}}`), "ServiceMonitor", "berth-controller")
	eps, _, _ = unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ep := eps[0].(map[string]any)
	if name, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name"); name != "prometheus-token" || ep["bearerTokenFile"] != nil {
		t.Errorf("ServiceMonitor endpoint %v, want the authorization's credentials and no bearerTokenFile", ep)
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// TestGOMEMLIMITSetByTheUserWins: a GOMEMLIMIT in env replaces the limit
// the controller takes from the container's memory limit (only the user's
// is passed), and other variables keep it.
func TestGOMEMLIMITSetByTheUserWins(t *testing.T) {
	c := deployment(t, render(t, "--set-json", `env=[{"name":"GOMEMLIMIT","value":"300MiB"},{"name":"TZ","value":"UTC"}]`)).Spec.Template.Spec.Containers[0]
	if got := memoryLimits(c); len(got) != 1 || got[0].Name != "GOMEMLIMIT" || got[0].Value != "300MiB" {
		t.Errorf("memory limit variables %+v, want the user's GOMEMLIMIT 300MiB only", got)
	}
	c = deployment(t, render(t, "--set-json", `env=[{"name":"TZ","value":"UTC"}]`)).Spec.Template.Spec.Containers[0]
	if got := memoryLimits(c); len(got) != 1 || got[0].Name != "BERTH_MEMORY_LIMIT" || got[0].ValueFrom == nil {
		t.Errorf("memory limit variables %+v beside another variable, want the container's memory limit", got)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "TZ" && e.Value == "UTC" }) {
		t.Errorf("env %+v: the user's TZ is missing", c.Env)
	}
}

// memoryLimits are the container's GOMEMLIMIT and BERTH_MEMORY_LIMIT.
func memoryLimits(c corev1.Container) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" || e.Name == "BERTH_MEMORY_LIMIT" {
			out = append(out, e)
		}
	}
	return out
}
