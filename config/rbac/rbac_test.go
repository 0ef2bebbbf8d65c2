package rbac_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/berth-dev/berth/config/rbac"
)

// reviewed is every right berth's service account holds, one line per
// (scope, group, resource, names) with its verbs. A change to the RBAC
// markers changes the generated role.yaml and fails this test until the
// list is updated: every new right is a reviewed decision.
var reviewed = []string{
	// Cluster-wide reads: the scheduler simulation sees the whole cluster.
	"cluster core namespaces: create get list patch watch",   // tenants: the namespace tenant-<name> (config/policy narrows berth to those names)
	"cluster core nodes: create delete get list patch watch", // launch, launch timeout, initialized label, scale-down taint and removal, Cluster API adoption; config/policy narrows patch/delete to nodes berth marked (adoption: labels and the mark added, nothing else) and never a control-plane node
	"cluster core nodes/status: patch",                       // the BerthDisruption condition on berth's nodes (config/policy: marked nodes only)
	"cluster core persistentvolumeclaims: get list watch",
	"cluster core persistentvolumes: get list watch",
	"cluster core limitranges: get list watch",                             // DaemonSet overhead: the container defaults a DaemonSet's first pods will get
	"cluster node.k8s.io runtimeclasses: get list watch",                   // DaemonSet overhead: the pod overhead a DaemonSet's first pods will get
	"cluster core pods: get list patch watch",                              // companion headroom: remove berth's scheduling gate from a workload and write its companion's size and share key; config/policy (berth-changes-only-its-part-of-pods) refuses any other change: no image, spec, other labels or annotations
	"cluster core pods/status: patch",                                      // nominatedNodeName of pods berth launched a node for (config/policy: nothing else of the status or metadata)
	"cluster core pods/eviction: create",                                   // scale-down drains through the Eviction API (PodDisruptionBudgets apply), never by deleting pods
	"cluster policy poddisruptionbudgets: get list watch",                  // scale-down plans within the budgets
	"cluster core podtemplates: create delete get list patch update watch", // CapacityBuffer's podTemplateRef in the buffer's namespace (pod templates run nothing)
	"cluster core replicationcontrollers/scale: get",
	"cluster core replicationcontrollers: get list watch", // scale-down: a pod whose controller is gone keeps its node (metadata only)
	"cluster core resourcequotas: get list watch",
	"cluster core events: create patch",
	"cluster events.k8s.io events: create list patch", // tenants: berth's scale-up events about a tenant's pod become its status (read in tenant-<name> only, uncached)
	"cluster apps daemonsets: get list watch",
	"cluster apps deployments: create get list patch watch", // tenants: one Deployment per tenant, in tenant-<name> only (config/policy)
	"cluster apps replicasets: get list watch",
	"cluster apps statefulsets: get list watch",
	"cluster apps deployments/scale: get",
	"cluster apps replicasets/scale: get",
	"cluster apps statefulsets/scale: get",
	"cluster batch jobs: get list watch",
	"cluster autoscaling.x-k8s.io capacitybuffers: get list watch",
	"cluster autoscaling.x-k8s.io capacitybuffers/status: get patch update",
	"cluster berth.dev headrooms: get list watch",
	"cluster berth.dev companionprofiles: get list watch",
	"cluster storage.k8s.io storageclasses: get list watch",                                                  // a workload's unbound claim of a profile's CSI driver
	"cluster storage.k8s.io volumeattachments: list watch",                                                   // a drained node waits for its volumes to detach before its removal
	"cluster admissionregistration.k8s.io mutatingwebhookconfigurations: create",                             // the companion webhook's configuration, while some CompanionProfile exists; RBAC cannot narrow create to a name, config/policy (berth-writes-only-its-webhook) narrows it to berth-companion, pods CREATE only, served in berth-system or at loopback
	"cluster admissionregistration.k8s.io mutatingwebhookconfigurations[berth-companion]: delete get update", // only its own
	"cluster berth.dev nodegroups: get list patch update watch",                                              // the finalizer berth.dev/nodes: a deleted group's nodes are drained (or orphaned) first
	"cluster berth.dev nodegroups/finalizers: update",
	"cluster berth.dev tenants: get list watch",
	"cluster berth.dev tenanttypes: get list watch",
	"cluster berth.dev tenants/status: get patch update",
	"cluster berth.dev tenants/finalizers: update",   // owner references with blockOwnerDeletion on a tenant's objects
	"cluster core configmaps: create patch",          // tenants: their configuration, in tenant-<name> only (config/policy)
	"cluster core services: create delete get patch", // tenants: their type's Service, in tenant-<name> only (config/policy)
	"cluster berth.dev headrooms/status: get patch update",
	"cluster berth.dev headrooms/finalizers: update",                  // owner references with blockOwnerDeletion on a Headroom's placeholder Deployment and reserve DaemonSet (OwnerReferencesPermissionEnforcement)
	"cluster autoscaling.x-k8s.io capacitybuffers/finalizers: update", // owner references with blockOwnerDeletion on a CapacityBuffer's PodTemplate
	"cluster berth.dev nodegroups/status: get patch update",
	"cluster authentication.k8s.io tokenreviews: create",        // who calls /metrics
	"cluster authorization.k8s.io subjectaccessreviews: create", // may they read it
	"cluster scheduling.k8s.io priorityclasses: get",            // checks at start that the shipped classes exist; never creates them
	// Cluster API provider (a management cluster that is this cluster):
	// mark the chosen Machine with delete-machine, then lower replicas.
	"cluster cluster.x-k8s.io machines: get list patch watch",
	"cluster cluster.x-k8s.io machinedeployments: get list watch",
	"cluster cluster.x-k8s.io machinesets: get list watch",
	"cluster cluster.x-k8s.io machinepools: get list watch",
	"cluster cluster.x-k8s.io machinedeployments/scale: get update",
	"cluster cluster.x-k8s.io machinesets/scale: get update",
	"cluster cluster.x-k8s.io machinepools/scale: get update",
	"cluster infrastructure.cluster.x-k8s.io awsmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io azuremachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io gcpmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io vspheremachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io openstackmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io dockermachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io devmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io hcloudmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io metal3machinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io nutanixmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io kubevirtmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io ibmpowervsmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io ibmvpcmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io oscmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io cloudstackmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io proxmoxmachinetemplates: get",
	"cluster infrastructure.cluster.x-k8s.io linodemachinetemplates: get",
	// DRA: the planner reads devices, claims and workloads; the kwok
	// provider publishes the ResourceSlices of the nodes it launches, as a
	// DRA driver would (a cloud provider's drivers do that themselves).
	"cluster resource.k8s.io deviceclasses: get list watch",
	"cluster resource.k8s.io resourceclaims: get list watch",
	"cluster resource.k8s.io resourceclaimtemplates: get list watch",
	"cluster resource.k8s.io resourceslices: create get list watch",
	"cluster scheduling.k8s.io podgroups: get list watch",
	"cluster scheduling.k8s.io workloads: get list watch",
	// Writes only in berth's own namespace.
	"berth-system core configmaps: create get update", // berth-demand-<headroom>: the demand history a Headroom's target learned, kept across restarts
	"berth-system core pods: create delete",           // reserve pods handed to burst-critical pods, placeholders on a node being removed; companion placeholders (created, deleted); berth-system enforces Pod Security restricted (config/system/namespace.yaml)
	"berth-system core secrets: create",
	"berth-system core secrets[berth-webhook-cert]: get update", // the webhook's serving certificate, issued and rotated by berth
	"berth-system apps daemonsets: create delete patch update",  // per-node reserve
	"berth-system apps deployments: create delete patch update", // headroom placeholders
	"berth-system coordination.k8s.io leases: create",
	"berth-system coordination.k8s.io leases[berth-controller]: get patch update", // its own leader election lease only
}

// TestRBACIsTheReviewedList: the generated Role and ClusterRole grant
// exactly the reviewed rights; in particular no write outside berth-system
// except nodes, pods (the companion gate), pod status, pod templates,
// events, berth's own webhook configuration and the status of berth's own
// kinds, and no wildcard.
func TestRBACIsTheReviewedList(t *testing.T) {
	data, err := rbac.Files.ReadFile("role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var role rbacv1.Role // a ClusterRole decodes the same way
		if err := dec.Decode(&role); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		scope := "cluster"
		if role.Namespace != "" {
			scope = role.Namespace
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if g == "*" || res == "*" || strings.HasPrefix(res, "*/") || slices.Contains(r.Verbs, "*") {
						t.Errorf("wildcard rule %+v", r)
					}
					group := g
					if group == "" {
						group = "core"
					}
					names := ""
					if len(r.ResourceNames) > 0 {
						names = "[" + strings.Join(r.ResourceNames, ",") + "]"
					}
					verbs := slices.Clone(r.Verbs)
					slices.Sort(verbs)
					got = append(got, fmt.Sprintf("%s %s %s%s: %s", scope, group, res, names, strings.Join(verbs, " ")))
				}
			}
		}
	}
	want := slices.Clone(reviewed)
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generated RBAC differs from the reviewed list (-reviewed +generated):\n%s", diff)
	}
}
