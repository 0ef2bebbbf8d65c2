package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// The bounds of the Tenant API (api/v1alpha1/tenant_types.go), checked
// here first so that the user gets one clear message and nothing is sent.
const (
	maxNameLength  = 56
	maxConfigKeys  = 64
	maxValueLength = 4096
)

// ValidateName checks that name can name a tenant: a DNS label short
// enough that tenant-<name> is one too.
func ValidateName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("tenant name %q is not a DNS label: %s", name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return fmt.Errorf("tenant name %q must start with a letter (its Service is named after it): %s", name, strings.Join(errs, "; "))
	}
	if len(name) > maxNameLength {
		return fmt.Errorf("tenant name %q is %d characters long; at most %d, so that its namespace %s<name> is a DNS label",
			name, len(name), maxNameLength, v1alpha1.TenantNamespacePrefix)
	}
	return nil
}

// ParseSets parses --set KEY=VALUE flags into configuration values. A key
// given twice is an error rather than a silent choice.
func ParseSets(sets []string) (v1alpha1.ConfigValues, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	if len(sets) > maxConfigKeys {
		return nil, fmt.Errorf("%d --set values; at most %d", len(sets), maxConfigKeys)
	}
	out := make(v1alpha1.ConfigValues, len(sets))
	var errs []error
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("--set %q: want KEY=VALUE", s))
		case len(validation.IsConfigMapKey(k)) > 0:
			errs = append(errs, fmt.Errorf("--set %q: the key is no ConfigMap key: %s", s, strings.Join(validation.IsConfigMapKey(k), "; ")))
		case len(v) > maxValueLength:
			errs = append(errs, fmt.Errorf("--set %s: the value is %d characters long; at most %d", k, len(v), maxValueLength))
		default:
			if _, dup := out[k]; dup {
				errs = append(errs, fmt.Errorf("--set %s given twice", k))
			}
			out[k] = v1alpha1.ConfigValue(v)
		}
	}
	return out, errors.Join(errs...)
}

// Preflight checks, before anything is created, that the type and its
// node group exist and that no tenant of that name exists.
func Preflight(ctx context.Context, c client.Reader, name, typ string) error {
	tt := &v1alpha1.TenantType{}
	if err := c.Get(ctx, client.ObjectKey{Name: typ}, tt); apierrors.IsNotFound(err) {
		return fmt.Errorf("tenant type %q does not exist; %s", typ, knownTypes(ctx, c))
	} else if err != nil {
		return fmt.Errorf("reading tenant type %s: %w", typ, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: tt.Spec.NodeGroup}, &v1alpha1.NodeGroup{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("tenant type %s runs on node group %q, which does not exist", typ, tt.Spec.NodeGroup)
	} else if err != nil {
		return fmt.Errorf("reading node group %s: %w", tt.Spec.NodeGroup, err)
	}
	have := &v1alpha1.Tenant{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, have); err == nil {
		return alreadyExists(have)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading tenant %s: %w", name, err)
	}
	ns := &corev1.Namespace{}
	nsName := v1alpha1.TenantNamespacePrefix + name
	if err := c.Get(ctx, client.ObjectKey{Name: nsName}, ns); err == nil {
		if ns.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s of a former tenant %s is still terminating; try again when it is gone", nsName, name)
		}
		return fmt.Errorf("namespace %s already exists and is not a tenant's; berth would not take it over", nsName)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading namespace %s: %w", nsName, err)
	}
	return nil
}

func alreadyExists(t *v1alpha1.Tenant) error {
	return fmt.Errorf("tenant %s already exists (type %s, phase %s)", t.Name, t.Spec.Type, orNone(string(t.Status.Phase)))
}

// knownTypes says which types exist, for an error about one that does not.
func knownTypes(ctx context.Context, c client.Reader) string {
	list := &v1alpha1.TenantTypeList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) == 0 {
		return "no tenant types exist"
	}
	names := make([]string, 0, len(list.Items))
	for _, tt := range list.Items {
		names = append(names, tt.Name)
	}
	slices.Sort(names)
	return "known types: " + strings.Join(names, ", ")
}

// Create checks the input (Preflight) and creates the tenant.
func Create(ctx context.Context, c client.Client, name, typ string, config v1alpha1.ConfigValues) (*v1alpha1.Tenant, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := Preflight(ctx, c, name, typ); err != nil {
		return nil, err
	}
	t := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TenantSpec{Type: typ, Config: config}}
	if err := c.Create(ctx, t); apierrors.IsAlreadyExists(err) {
		// Created by someone else since the preflight.
		return nil, fmt.Errorf("tenant %s already exists", name)
	} else if err != nil {
		return nil, fmt.Errorf("creating tenant %s: %w", name, err)
	}
	return t, nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
