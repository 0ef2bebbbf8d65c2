package clusterread

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// The RBAC markers for these reads are on the provisioning controller
// (controller-gen reads internal/controller only).

// DRA reads the dynamic resource allocation objects the planners simulate
// with: DeviceClasses, ResourceClaims, ResourceClaimTemplates,
// ResourceSlices (resource.k8s.io/v1) and PodGroups (scheduling.k8s.io/
// v1alpha2). An API the cluster does not serve (no DRA, or PodGroups
// without the GenericWorkload gate) reads as empty.
func DRA(ctx context.Context, c client.Reader) (snapshot.DRA, error) {
	var out snapshot.DRA
	classes := &resourcev1.DeviceClassList{}
	claims := &resourcev1.ResourceClaimList{}
	templates := &resourcev1.ResourceClaimTemplateList{}
	slices := &resourcev1.ResourceSliceList{}
	groups := &schedulingv1alpha2.PodGroupList{}
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{{"deviceclasses", classes}, {"resourceclaims", claims}, {"resourceclaimtemplates", templates}, {"resourceslices", slices}, {"podgroups", groups}} {
		if err := c.List(ctx, l.list); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return out, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	for i := range classes.Items {
		out.DeviceClasses = append(out.DeviceClasses, &classes.Items[i])
	}
	for i := range claims.Items {
		out.Claims = append(out.Claims, &claims.Items[i])
	}
	for i := range templates.Items {
		out.ClaimTemplates = append(out.ClaimTemplates, &templates.Items[i])
	}
	for i := range slices.Items {
		out.Slices = append(out.Slices, &slices.Items[i])
	}
	for i := range groups.Items {
		out.PodGroups = append(out.PodGroups, &groups.Items[i])
	}
	return out, nil
}
