package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/devenv"
)

// The test's infrastructure provider: Cluster API's contract for an
// infrastructure machine, fulfilled with a KWOK node. Cluster API's core
// controllers (MachineDeployment, MachineSet, Machine, Cluster) run for
// real; only the machine itself is fake, as a KWOK node is.
const (
	infraGroup    = "infrastructure.berth.test"
	infraVersion  = "v1alpha1"
	kwokProviderP = "kwok-capi://"
)

var (
	kwokMachineGVK  = schema.GroupVersionKind{Group: infraGroup, Version: infraVersion, Kind: "KWOKMachine"}
	capiGV          = schema.GroupVersion{Group: "cluster.x-k8s.io", Version: "v1beta2"}
	machineListGVK  = capiGV.WithKind("MachineList")
	machineDeplGVK  = capiGV.WithKind("MachineDeployment")
	infraKindPlural = map[string]string{"KWOKMachine": "kwokmachines", "KWOKMachineTemplate": "kwokmachinetemplates", "KWOKControlPlane": "kwokcontrolplanes"}
)

// installClusterAPI builds (once, cached) and starts Cluster API's core
// manager against the dev cluster, with its CRDs and the test provider's.
func installClusterAPI(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	capi, err := devenv.EnsureClusterAPI(ctx, root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyAll(ctx, os.DirFS(capi.CRDs), createIfAbsent); err != nil {
		t.Fatalf("installing Cluster API CRDs: %v", err)
	}
	for kind, plural := range infraKindPlural {
		if err := createIfAbsent(ctx, infraCRD(kind, plural)); err != nil {
			t.Fatalf("installing %s CRD: %v", kind, err)
		}
	}
	waitCRDsEstablished(t)
	dir := t.TempDir()
	writeWebhookCert(t, dir)
	logFile := filepath.Join(dir, "capi.log")
	if d := os.Getenv("BERTH_E2E_LOG_DIR"); d != "" {
		logFile = filepath.Join(d, t.Name()+"-cluster-api-core.log")
	}
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(capi.Manager,
		"--webhook-port="+strconv.Itoa(freePort(t)), "--webhook-cert-dir="+dir,
		"--health-addr=127.0.0.1:"+strconv.Itoa(freePort(t)),
		"--diagnostics-address=127.0.0.1:"+strconv.Itoa(freePort(t)), "--insecure-diagnostics",
		"--machineset-preflight-checks=", "--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
		"--sync-period=30s", "--v=2")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath())
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Cluster API core %s running (log %s)", capi.Version, logFile)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = f.Close()
	})
}

// infraCRD is a CRD of the test provider, labelled with the Cluster API
// contract it fulfils so that Cluster API finds its version.
func infraCRD(kind, plural string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":   plural + "." + infraGroup,
			"labels": map[string]any{"cluster.x-k8s.io/v1beta2": infraVersion},
		},
		"spec": map[string]any{
			"group": infraGroup, "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": plural[:len(plural)-1]},
			"versions": []any{map[string]any{
				"name": infraVersion, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	return u
}

func waitCRDsEstablished(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err1 := env.Client.List(context.Background(), listOf(machineListGVK))
		err2 := env.Client.List(context.Background(), listOf(kwokMachineGVK.GroupVersion().WithKind("KWOKMachineList")))
		if err1 == nil && err2 == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRDs not served: %v %v", err1, err2)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func listOf(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk)
	return l
}

func createIfAbsent(ctx context.Context, obj client.Object) error {
	if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// writeWebhookCert writes a self-signed serving certificate: Cluster API's
// manager serves its webhooks (no webhook configuration points at them
// here) and does not start without one.
func writeWebhookCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capi-webhook"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runKWOKInfrastructure is the test provider's controller: every
// KWOKMachine of the namespace gets a KWOK node with the machine's
// capacity and labels and a provider ID, and is then reported provisioned
// with that provider ID, as Cluster API's infrastructure contract asks. A
// KWOKMachine with spec.fail never gets infrastructure.
func runKWOKInfrastructure(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list := listOf(kwokMachineGVK.GroupVersion().WithKind("KWOKMachineList"))
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err == nil {
				for i := range list.Items {
					if err := provisionKWOKMachine(ctx, ns, &list.Items[i]); err != nil && ctx.Err() == nil {
						t.Logf("kwok infrastructure: %s: %v", list.Items[i].GetName(), err)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
}

func provisionKWOKMachine(ctx context.Context, ns string, km *unstructured.Unstructured) error {
	if km.GetDeletionTimestamp() != nil {
		return nil
	}
	if ok, _, _ := unstructured.NestedBool(km.Object, "status", "initialization", "provisioned"); ok {
		return nil
	}
	if fail, _, _ := unstructured.NestedBool(km.Object, "spec", "fail"); fail {
		return nil
	}
	name := km.GetName()
	providerID := kwokProviderP + ns + "/" + name
	capacity := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	specCap, _, _ := unstructured.NestedStringMap(km.Object, "spec", "capacity")
	for k, v := range specCap {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return err
		}
		capacity[corev1.ResourceName(k)] = q
	}
	labels, _, _ := unstructured.NestedStringMap(km.Object, "spec", "nodeLabels")
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelHostname] = name
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			v1alpha1.AnnotationKWOKNode: v1alpha1.AnnotationKWOKNodeValue,
			v1alpha1.AnnotationReadyAt:  now.Add(time.Second).UTC().Format(time.RFC3339Nano),
		}},
		Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy(), Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "machine is booting",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}},
	}
	if err := createIfAbsent(ctx, node); err != nil {
		return fmt.Errorf("creating node: %w", err)
	}
	if err := unstructured.SetNestedField(km.Object, providerID, "spec", "providerID"); err != nil {
		return err
	}
	if err := env.Client.Update(ctx, km); err != nil {
		return fmt.Errorf("setting providerID: %w", err)
	}
	if err := unstructured.SetNestedField(km.Object, true, "status", "initialization", "provisioned"); err != nil {
		return err
	}
	if err := env.Client.Status().Update(ctx, km); err != nil {
		return fmt.Errorf("setting provisioned: %w", err)
	}
	return nil
}
