package dev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/config/demo"
	"github.com/berth-dev/berth/internal/scheme"
)

func (o *options) demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Install the demo node groups and workloads into the local control plane",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.running()
			if err != nil {
				return err
			}
			cfg, err := c.RESTConfig()
			if err != nil {
				return err
			}
			cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				return err
			}
			if err := applyDemo(cmd.Context(), cl, cmd.OutOrStdout()); err != nil {
				return err
			}
			printTryThis(cmd.OutOrStdout(), filepath.Join(o.dir, "kubeconfig"))
			return nil
		},
	}
}

// applyDemo creates or updates every object of the embedded demo files.
func applyDemo(ctx context.Context, cl client.Client, out io.Writer) error {
	return fs.WalkDir(demo.Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := demo.Files.ReadFile(path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := createOrUpdate(ctx, cl, obj); err != nil {
				return fmt.Errorf("%s: %s %s: %w", path, obj.GetKind(), obj.GetName(), err)
			}
			_, _ = fmt.Fprintf(out, "applied %s %s\n", obj.GetKind(), obj.GetName())
		}
	})
}

func createOrUpdate(ctx context.Context, cl client.Client, obj *unstructured.Unstructured) error {
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(obj.GroupVersionKind())
	err := cl.Get(ctx, client.ObjectKeyFromObject(obj), have)
	if apierrors.IsNotFound(err) {
		return cl.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(have.GetResourceVersion())
	return cl.Update(ctx, obj)
}

func printTryThis(w io.Writer, kubeconfig string) {
	k := "kubectl --kubeconfig " + kubeconfig
	berth := "bin/berth"
	_, _ = fmt.Fprintf(w, `
berth demo installed: node groups general (spot/on-demand, 3 zones), large (max 3) and medium (max 5) for tenants,
from zero; tenant types premium (on large) and standard (on medium), one tenant per node; and a Headroom of two
500m units in general (a node is launched for it right away).
Try, in another terminal:
  %[1]s get headrooms,nodegroups
  %[1]s scale deployment web --replicas=12          # zone-spread pods: cheapest nodes in all zones
  %[1]s get nodes -L berth.dev/nodegroup,node.kubernetes.io/instance-type,berth.dev/capacity-type,topology.kubernetes.io/zone -w
  %[2]s tenant --kubeconfig %[3]s types
  %[2]s tenant --kubeconfig %[3]s create premium-1 --type premium --wait   # a tenant: its own "large" node from zero
  %[2]s tenant --kubeconfig %[3]s list
  %[1]s describe pod -l app=web | grep -A3 TriggeredScaleUp
  %[2]s dev interrupt <a spot node of general> --in 2m   # a spot interruption: replaced and drained before the deadline
  %[2]s explain node <node> --kubeconfig %[3]s         # why berth keeps, drains or replaces it
  %[2]s explain pod default/<web pod> --kubeconfig %[3]s   # why it is pending, and what berth does about it
  %[2]s dashboard --kubeconfig %[3]s                 # all of it live on http://127.0.0.1:8090
(%[2]s is the binary make run built; 'go install ./cmd/berth' puts berth on your PATH, see docs/getting-started.md)
`, k, berth, kubeconfig)
}
