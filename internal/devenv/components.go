package devenv

import (
	_ "embed"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/berth-dev/berth/api/v1alpha1"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// schedulerConfig raises the scheduler's client rate limits above the
// defaults (50 qps) so that scale tests measure berth, not the binder.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`

// Ports are the loopback ports of one local cluster.
type Ports struct {
	Etcd              int `json:"etcd"`
	EtcdPeer          int `json:"etcdPeer"`
	APIServer         int `json:"apiServer"`
	Scheduler         int `json:"scheduler"`
	ControllerManager int `json:"controllerManager"`
	KWOK              int `json:"kwok"`
}

// freePorts reserves n free loopback ports. The listeners are held until all
// ports are chosen so that one call never returns the same port twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func allocatePorts() (Ports, error) {
	p, err := freePorts(6)
	if err != nil {
		return Ports{}, err
	}
	return Ports{Etcd: p[0], EtcdPeer: p[1], APIServer: p[2], Scheduler: p[3], ControllerManager: p[4], KWOK: p[5]}, nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// workloadGates turn on what claims reserved for a whole workload need
// (KEP-5729, alpha in 1.36): PodGroups and Workloads (GenericWorkload) and
// ResourceClaims listed in PodGroup.spec.resourceClaims being reserved for
// the group (DRAWorkloadResourceClaims). DRA itself (resource.k8s.io/v1)
// is on by default.
const workloadGates = "GenericWorkload=true,DRAWorkloadResourceClaims=true"

// processes returns the components of a cluster in start order. It is long
// because it is the table of every component's flags, kept in one place.
func (c *Cluster) processes(bins Binaries) ([]*Process, error) {
	pk := pki{dir: filepath.Join(c.Dir, "pki")}
	kubeconfig := c.KubeconfigPath()
	p := c.Ports
	logs := filepath.Join(c.Dir, "logs")
	schedCfg := filepath.Join(c.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedCfg, fmt.Appendf(nil, schedulerConfig, kubeconfig), 0o600); err != nil {
		return nil, err
	}
	kwokCfg := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(kwokCfg, kwokStages, 0o600); err != nil {
		return nil, err
	}
	proc := func(name, health string, args ...string) *Process {
		return &Process{Name: name, Binary: bins.Path(name), Args: args, LogFile: filepath.Join(logs, name+".log"), Health: health}
	}
	etcdURL := "http://" + loopback(p.Etcd)
	peerURL := "http://" + loopback(p.EtcdPeer)
	return []*Process{
		proc(Etcd, etcdURL+"/health",
			"--name=berth-dev",
			"--data-dir="+filepath.Join(c.Dir, "etcd"),
			"--listen-client-urls="+etcdURL,
			"--advertise-client-urls="+etcdURL,
			"--listen-peer-urls="+peerURL,
			"--initial-advertise-peer-urls="+peerURL,
			"--initial-cluster=berth-dev="+peerURL,
			// A throwaway development store: durability is not worth the
			// fsync latency on a small machine.
			"--unsafe-no-fsync",
			"--log-level=warn",
		),
		proc(APIServer, "https://"+loopback(p.APIServer)+"/readyz",
			"--etcd-servers="+etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(p.APIServer),
			"--cert-dir="+filepath.Join(c.Dir, "apiserver-certs"),
			"--tls-cert-file="+pk.servingCert(),
			"--tls-private-key-file="+pk.servingKey(),
			"--client-ca-file="+pk.caCert(),
			"--service-account-key-file="+pk.saPub(),
			"--service-account-signing-key-file="+pk.saKey(),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--authorization-mode=RBAC",
			// As OpenShift does: berth may set blockOwnerDeletion only on
			// owners whose finalizers it may update (test/install runs it
			// as the chart's ServiceAccount).
			"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
			"--service-cluster-ip-range=10.0.0.0/24",
			"--allow-privileged=true",
			"--profiling=false",
			"--feature-gates="+workloadGates,
			// PodGroups and Workloads (GenericWorkload, alpha in 1.36).
			"--runtime-config=scheduling.k8s.io/v1alpha2=true",
		),
		proc(ControllerManager, "https://"+loopback(p.ControllerManager)+"/healthz",
			"--kubeconfig="+kubeconfig,
			"--authentication-kubeconfig="+kubeconfig,
			"--authorization-kubeconfig="+kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(p.ControllerManager),
			"--cert-dir="+filepath.Join(c.Dir, "kcm-certs"),
			"--leader-elect=false",
			"--service-account-private-key-file="+pk.saKey(),
			"--root-ca-file="+pk.caCert(),
			"--cluster-signing-cert-file="+pk.caCert(),
			"--cluster-signing-key-file="+pk.caKey(),
			"--kube-api-qps=200",
			"--kube-api-burst=400",
			"--concurrent-replicaset-syncs=10",
			// Margin for a loaded 2-core machine: KWOK renews node leases
			// every 10 s (see --node-lease-duration-seconds below); a
			// renewal that lags past the default 50 s would mark a healthy
			// node NotReady and the scheduler would bind pods off the
			// nodes planned for them.
			"--node-monitor-grace-period=3m",
			"--profiling=false",
			"--feature-gates="+workloadGates,
		),
		proc(Scheduler, "https://"+loopback(p.Scheduler)+"/healthz",
			"--config="+schedCfg,
			"--authentication-kubeconfig="+kubeconfig,
			"--authorization-kubeconfig="+kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(p.Scheduler),
			"--cert-dir="+filepath.Join(c.Dir, "scheduler-certs"),
			"--profiling=false",
			// Asynchronous preemption (beta, on by default) can leave a
			// preemptor whose last victim another preemptor already deleted
			// pending until the scheduler's 5-minute flush
			// (kubernetes/kubernetes#141694; placeholder e2e test, 2 runs in
			// 8 on this machine); synchronous preemption does not.
			"--feature-gates=SchedulerAsyncPreemption=false,"+workloadGates,
		),
		proc(KWOK, "http://"+loopback(p.KWOK)+"/healthz",
			"--kubeconfig="+kubeconfig,
			"--config="+kwokCfg,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector="+v1alpha1.AnnotationKWOKNode+"="+v1alpha1.AnnotationKWOKNodeValue,
			"--server-address="+loopback(p.KWOK),
			// Pod IPs come from this range; KWOK's default /24 runs out at
			// a few hundred pods.
			"--cidr=10.128.0.0/12",
			// Fake kubelets renew node leases, as real ones do. Without the
			// flag KWOK keeps none (its default of 40 applies only to a
			// KwokConfiguration object, which the stages file is not), and
			// the node's status heartbeat in the stages comes every 10
			// minutes: the node lifecycle controller marked every node
			// NotReady after its grace period, tainted it and evicted pods.
			"--node-lease-duration-seconds=40",
		),
	}, nil
}
