package tenant

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cli/output"
)

// List prints the tenants: a table (NAME, TYPE, PHASE, NODE, NODE GROUP,
// AGE), or the TenantList as JSON or YAML.
func List(ctx context.Context, c client.Reader, out io.Writer, format output.Format, now time.Time) error {
	list := &v1alpha1.TenantList{}
	if err := c.List(ctx, list); err != nil {
		return fmt.Errorf("listing tenants: %w", err)
	}
	list.APIVersion, list.Kind = v1alpha1.GroupVersion.String(), "TenantList"
	for i := range list.Items {
		// As kubectl, without managedFields (noise for a reader).
		list.Items[i].APIVersion, list.Items[i].Kind = v1alpha1.GroupVersion.String(), "Tenant"
		list.Items[i].ManagedFields = nil
	}
	return format.Write(out, list, func(w io.Writer) { PrintTenants(w, list.Items, now) })
}

// PrintTenants writes tenants as a table, by name.
func PrintTenants(out io.Writer, tenants []v1alpha1.Tenant, now time.Time) {
	slices.SortFunc(tenants, func(a, b v1alpha1.Tenant) int { return strings.Compare(a.Name, b.Name) })
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tTYPE\tPHASE\tNODE\tNODE GROUP\tAGE")
	for _, t := range tenants {
		phase := string(t.Status.Phase)
		if t.DeletionTimestamp != nil {
			phase = string(v1alpha1.TenantTerminating)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Spec.Type, orNone(phase), orNone(t.Status.NodeName),
			orNone(t.Status.NodeGroup), duration.HumanDuration(now.Sub(t.CreationTimestamp.Time)))
	}
	_ = tw.Flush()
}

// ListTypes prints the tenant types: a table (NAME, NODE GROUP,
// DEDICATED, REQUESTS, SERVICE, IMAGE), or the TenantTypeList as JSON or
// YAML.
func ListTypes(ctx context.Context, c client.Reader, out io.Writer, format output.Format) error {
	list := &v1alpha1.TenantTypeList{}
	if err := c.List(ctx, list); err != nil {
		return fmt.Errorf("listing tenant types: %w", err)
	}
	list.APIVersion, list.Kind = v1alpha1.GroupVersion.String(), "TenantTypeList"
	for i := range list.Items {
		list.Items[i].APIVersion, list.Items[i].Kind = v1alpha1.GroupVersion.String(), "TenantType"
		list.Items[i].ManagedFields = nil
	}
	return format.Write(out, list, func(w io.Writer) { PrintTypes(w, list.Items) })
}

// PrintTypes writes tenant types as a table, by name.
func PrintTypes(out io.Writer, types []v1alpha1.TenantType) {
	slices.SortFunc(types, func(a, b v1alpha1.TenantType) int { return strings.Compare(a.Name, b.Name) })
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tNODE GROUP\tDEDICATED\tREQUESTS\tSERVICE\tIMAGE")
	for _, tt := range types {
		var req []string
		for _, name := range slices.Sorted(maps.Keys(tt.Spec.Template.Resources.Requests)) {
			q := tt.Spec.Template.Resources.Requests[name]
			req = append(req, string(name)+"="+q.String())
		}
		svc := "<none>"
		if s := tt.Spec.Service; s != nil {
			ports := make([]string, 0, len(s.Ports))
			for _, p := range s.Ports {
				ports = append(ports, fmt.Sprint(p.Port))
			}
			svc = string(s.Type) + ":" + strings.Join(ports, ",")
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\n", tt.Name, tt.Spec.NodeGroup, tt.Spec.Dedicated(),
			orNone(strings.Join(req, ",")), svc, tt.Spec.Template.Image)
	}
	_ = tw.Flush()
}

// Delete deletes a tenant in the foreground: it stays (Terminating) until
// the garbage collector has removed its namespace and objects.
func Delete(ctx context.Context, c client.Client, name string) (node string, err error) {
	t := &v1alpha1.Tenant{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, t); apierrors.IsNotFound(err) {
		return "", fmt.Errorf("tenant %s does not exist", name)
	} else if err != nil {
		return "", fmt.Errorf("reading tenant %s: %w", name, err)
	}
	// The node goes with a tenant that has one of its own; a shared node
	// stays for its other tenants.
	tt := &v1alpha1.TenantType{}
	if err := c.Get(ctx, client.ObjectKey{Name: t.Spec.Type}, tt); err == nil && tt.Spec.Dedicated() {
		node = t.Status.NodeName
	}
	err = c.Delete(ctx, t, client.PropagationPolicy(metav1.DeletePropagationForeground), client.Preconditions{UID: &t.UID})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("tenant %s does not exist", name)
	}
	if err != nil {
		return "", fmt.Errorf("deleting tenant %s: %w", name, err)
	}
	return node, nil
}
