package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/scheme"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// controllerSA is the user name of berth's service account.
const controllerSA = "system:serviceaccount:berth-system:berth-controller"

// asController returns a client that acts as berth's service account.
func asController(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func markedNode(name, mark string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelNodeGroup: "guarded"}}}
	if mark != "" {
		n.Annotations = map[string]string{v1alpha1.AnnotationLaunchedBy: mark}
	}
	return n
}

// TestOnlyBerthMarksAndDeletesItsNodes: the admission policies of
// config/policy make the owner mark trustworthy. Another user (here the
// cluster admin) cannot set it on a new node or add it to an existing one;
// berth's service account cannot delete a node without it, and can delete
// the nodes it marked.
func TestOnlyBerthMarksAndDeletesItsNodes(t *testing.T) {
	ctx := context.Background()
	berth := asController(t)
	// The policies take effect once the API server's policy cache has them.
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Create(ctx, markedNode("forged-mark", "some-uid"))
		if err == nil {
			_ = env.Client.Delete(ctx, markedNode("forged-mark", ""))
			return false, "the admin could create a node with berth's owner mark", nil
		}
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), fmt.Sprintf("creating a forged node: %v", err), nil
	})

	plain := markedNode("not-berths", "")
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Fatalf("creating a node without the mark: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), markedNode("not-berths", "")) })
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1alpha1.AnnotationLaunchedBy+`":"x"}}}`))
	if err := env.Client.Patch(ctx, markedNode("not-berths", ""), patch); err == nil || !strings.Contains(err.Error(), "only berth's service account") {
		t.Errorf("admin adding the owner mark: %v, want denied by the policy", err)
	}
	if err := berth.Delete(ctx, markedNode("not-berths", "")); err == nil || !strings.Contains(err.Error(), "only nodes it launched") {
		t.Errorf("berth deleting a node it did not launch: %v, want denied by the policy", err)
	}
	relabel := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"x"}}}`))
	if err := berth.Patch(ctx, markedNode("not-berths", ""), relabel); err == nil || !strings.Contains(err.Error(), "only nodes it launched") {
		t.Errorf("berth relabelling a node it did not launch: %v, want denied by the policy", err)
	}

	// berth creates only KWOK nodes it launches: not the Node of a
	// machine about to register, with its mark.
	if err := berth.Create(ctx, markedNode("berths-not-kwok", "uid-1"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "only the KWOK nodes it launches") {
		t.Errorf("berth creating a node that is not KWOK's: %v, want denied by the policy", err)
	}
	own := markedNode("berths-own", "uid-1")
	own.Annotations[v1alpha1.AnnotationKWOKNode] = v1alpha1.AnnotationKWOKNodeValue
	own.Spec.ProviderID = v1alpha1.ProviderIDPrefixKWOK + own.Name
	if err := berth.Create(ctx, own); err != nil {
		t.Fatalf("berth creating a marked KWOK node: %v", err)
	}
	if err := berth.Delete(ctx, markedNode("berths-own", "")); err != nil {
		t.Errorf("berth deleting a node it marked: %v", err)
	}
}

// TestMetricsNeedAnAuthorizedCaller: with the default --metrics-secure the
// endpoint speaks HTTPS and answers only callers the API server
// authenticates and authorizes for get on /metrics.
func TestMetricsNeedAnAuthorizedCaller(t *testing.T) {
	ctx := context.Background()
	reader := "metrics-reader"
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: reader, Namespace: v1alpha1.SystemNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nosy", Namespace: v1alpha1.SystemNamespace}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: reader},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: reader, Namespace: v1alpha1.SystemNamespace}}},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	token := func(sa string) string {
		tr, err := env.Clientset.CoreV1().ServiceAccounts(v1alpha1.SystemNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	startController(t, "--metrics-secure=true", "--metrics-bind-address", addr, "--leader-elect=false")
	// The endpoint has a self-signed certificate: this test checks who may
	// read it, not the certificate.
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test endpoint
	status := func(bearer string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
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
	allowed, nosy := token(reader), token("nosy")
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		code, err := status(allowed)
		return code == http.StatusOK, fmt.Sprintf("authorized caller got %d", code), err
	})
	for _, c := range []struct {
		who, token string
		want       int
	}{{"anonymous", "", http.StatusUnauthorized}, {"a service account without the right", nosy, http.StatusForbidden}} {
		if code, err := status(c.token); err != nil || code != c.want {
			t.Errorf("%s reading /metrics: %d %v, want %d", c.who, code, err, c.want)
		}
	}
	plain, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // a plain-HTTP probe of a TLS port
	if err == nil {
		_ = plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP read /metrics")
		}
	}
}
