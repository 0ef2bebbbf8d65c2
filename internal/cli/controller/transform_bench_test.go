package controller

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// apiPod is a pod of a Deployment as kube-apiserver returns it to an
// informer: the defaults and admission's additions (the service account
// token volume and its mounts, not-ready and unreachable tolerations),
// conditions and container statuses of a running pod, and the
// managedFields of its writers.
const apiPod = `{"metadata":{"name":"web-7c9f6d5b8-x2x4z","generateName":"web-7c9f6d5b8-","namespace":"shop","uid":"4a0f7a52-3a47-4d6e-9a5e-0d6f1c7e2b11","resourceVersion":"123456","creationTimestamp":"2026-11-24T10:00:00Z",
"labels":{"app":"web","pod-template-hash":"7c9f6d5b8"},
"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7c9f6d5b8","uid":"0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0","controller":true,"blockOwnerDeletion":true}],
"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-11-24T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0b1c2d3e\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{},"f:image":{},"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{}}}}}},
{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-24T10:00:05Z","fieldsType":"FieldsV1","subresource":"status","fieldsV1":{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}}}]},
"spec":{"volumes":[{"name":"kube-api-access-7x2kq","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}}],
"containers":[{"name":"app","image":"registry.example.com/shop/web:1.42.0","command":["/web"],"args":["--port=8080","--log-level=info"],
"ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],
"env":[{"name":"DB_HOST","value":"db.shop.svc"},{"name":"DB_USER","valueFrom":{"secretKeyRef":{"name":"db","key":"user"}}},{"name":"POD_NAME","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}}],
"resources":{"limits":{"memory":"512Mi"},"requests":{"cpu":"250m","memory":"256Mi"}},
"volumeMounts":[{"name":"kube-api-access-7x2kq","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],
"livenessProbe":{"httpGet":{"path":"/healthz","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},
"readinessProbe":{"httpGet":{"path":"/ready","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":5,"successThreshold":1,"failureThreshold":3},
"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","securityContext":{"runAsNonRoot":true,"allowPrivilegeEscalation":false}}],
"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","serviceAccount":"default","nodeName":"node-0042","securityContext":{},"schedulerName":"default-scheduler",
"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],
"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},
"status":{"phase":"Running","conditions":[{"type":"PodReadyToStartContainers","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-24T10:00:03Z"},{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-24T10:00:00Z"},{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-24T10:00:05Z"},{"type":"ContainersReady","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-24T10:00:05Z"},{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-24T10:00:00Z"}],
"hostIP":"10.0.3.17","hostIPs":[{"ip":"10.0.3.17"}],"podIP":"10.244.7.23","podIPs":[{"ip":"10.244.7.23"}],"startTime":"2026-11-24T10:00:00Z",
"containerStatuses":[{"name":"app","state":{"running":{"startedAt":"2026-11-24T10:00:03Z"}},"lastState":{},"ready":true,"restartCount":0,"image":"registry.example.com/shop/web:1.42.0","imageID":"registry.example.com/shop/web@sha256:2f1e0a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7","containerID":"containerd://8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b","started":true}],
"qosClass":"Burstable"}}`

// BenchmarkCachedPod reports the heap a pod of apiPod takes in the
// informer cache (B/pod), for 10,000 pods held at once, of 100
// Deployments (their own labels, owner and requests) on 334 nodes: as
// decoded, with only managedFields and container statuses dropped (what
// the cache dropped before it trimmed containers and volumes), trimmed
// (trimmer without sharing) and as the cache keeps them (trimmed, and the
// parts pods of a Deployment have alike shared). On a large cluster the
// cache of pods is most of the controller's memory.
func BenchmarkCachedPod(b *testing.B) {
	const pods = 10000
	raw := make([][]byte, pods)
	for i := range raw {
		d, n := i/100, i/30
		r := strings.NewReplacer("web-7c9f6d5b8-x2x4z", fmt.Sprintf("web%d-%08x-%05d", d, d, i),
			"4a0f7a52-3a47-4d6e-9a5e-0d6f1c7e2b11", fmt.Sprintf("4a0f7a52-3a47-4d6e-9a5e-%012d", i),
			"7c9f6d5b8", fmt.Sprintf("%08x", d), `"app":"web"`, fmt.Sprintf(`"app":"web%d"`, d),
			"0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", fmt.Sprintf("0b1c2d3e-4f50-6172-8394-%012d", d),
			`"cpu":"250m"`, fmt.Sprintf(`"cpu":"%dm"`, 100+d), "node-0042", fmt.Sprintf("node-%04d", n),
			"10.244.7.23", fmt.Sprintf("10.244.%d.%d", i/250, i%250))
		raw[i] = []byte(r.Replace(apiPod))
	}
	trims := []struct {
		name string
		trim func() func(*corev1.Pod) error
	}{
		{"decoded", func() func(*corev1.Pod) error { return func(*corev1.Pod) error { return nil } }},
		{"statuses", func() func(*corev1.Pod) error {
			return func(p *corev1.Pod) error {
				p.ManagedFields, p.Status.ContainerStatuses = nil, nil
				return nil
			}
		}},
		{"trimmed", byTrimmer[corev1.Pod](false)},
		{"shared", byTrimmer[corev1.Pod](true)},
	}
	for _, tr := range trims {
		b.Run(tr.name, func(b *testing.B) { heldBytes(b, raw, tr.trim, "B/pod") })
	}
}

// apiNode is a node as kube-apiserver returns it to an informer: the
// labels and annotations a cloud's nodes carry, the kubelet's conditions,
// addresses, versions, endpoints, images, volumes and runtime handlers,
// and the managedFields of its writers.
const apiNode = `{"metadata":{"name":"ip-10-0-3-17.ec2.internal","uid":"5b1e8c2a-7d3f-4e6a-9b0c-1d2e3f4a5b6c","resourceVersion":"987654","creationTimestamp":"2026-11-24T09:00:00Z",
"labels":{"beta.kubernetes.io/arch":"amd64","beta.kubernetes.io/instance-type":"m5.4xlarge","beta.kubernetes.io/os":"linux","failure-domain.beta.kubernetes.io/region":"us-east-1","failure-domain.beta.kubernetes.io/zone":"us-east-1a","kubernetes.io/arch":"amd64","kubernetes.io/hostname":"ip-10-0-3-17.ec2.internal","kubernetes.io/os":"linux","node.kubernetes.io/instance-type":"m5.4xlarge","topology.kubernetes.io/region":"us-east-1","topology.kubernetes.io/zone":"us-east-1a","topology.ebs.csi.aws.com/zone":"us-east-1a","karpenter.sh/capacity-type":"on-demand","berth.dev/nodegroup":"general","berth.dev/instance-type":"m5.4xlarge","berth.dev/capacity-type":"on-demand","team":"shop"},
"annotations":{"alpha.kubernetes.io/provided-node-ip":"10.0.3.17","csi.volume.kubernetes.io/nodeid":"{\"ebs.csi.aws.com\":\"i-0a1b2c3d4e5f60718\"}","node.alpha.kubernetes.io/ttl":"0","volumes.kubernetes.io/controller-managed-attach-detach":"true"},
"managedFields":[{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-24T09:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:alpha.kubernetes.io/provided-node-ip":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:kubernetes.io/hostname":{}}},"f:spec":{"f:providerID":{}}}},
{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-24T10:00:00Z","fieldsType":"FieldsV1","subresource":"status","fieldsV1":{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{}}}}]},
"spec":{"providerID":"aws:///us-east-1a/i-0a1b2c3d4e5f60718","podCIDR":"10.244.7.0/24","podCIDRs":["10.244.7.0/24"]},
"status":{"capacity":{"cpu":"16","ephemeral-storage":"104845292Ki","hugepages-1Gi":"0","hugepages-2Mi":"0","memory":"64756292Ki","pods":"234"},
"allocatable":{"cpu":"15890m","ephemeral-storage":"95551679124","hugepages-1Gi":"0","hugepages-2Mi":"0","memory":"63016516Ki","pods":"234"},
"conditions":[{"type":"MemoryPressure","status":"False","lastHeartbeatTime":"2026-11-24T10:00:00Z","lastTransitionTime":"2026-11-24T09:00:00Z","reason":"KubeletHasSufficientMemory","message":"kubelet has sufficient memory available"},
{"type":"DiskPressure","status":"False","lastHeartbeatTime":"2026-11-24T10:00:00Z","lastTransitionTime":"2026-11-24T09:00:00Z","reason":"KubeletHasNoDiskPressure","message":"kubelet has no disk pressure"},
{"type":"PIDPressure","status":"False","lastHeartbeatTime":"2026-11-24T10:00:00Z","lastTransitionTime":"2026-11-24T09:00:00Z","reason":"KubeletHasSufficientPID","message":"kubelet has sufficient PID available"},
{"type":"Ready","status":"True","lastHeartbeatTime":"2026-11-24T10:00:00Z","lastTransitionTime":"2026-11-24T09:00:30Z","reason":"KubeletReady","message":"kubelet is posting ready status"}],
"addresses":[{"type":"InternalIP","address":"10.0.3.17"},{"type":"InternalDNS","address":"ip-10-0-3-17.ec2.internal"},{"type":"Hostname","address":"ip-10-0-3-17.ec2.internal"}],
"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}},
"nodeInfo":{"machineID":"ec2a1b2c3d4e5f60718293a4b5c6d7e8","systemUUID":"ec2a1b2c-3d4e-5f60-7182-93a4b5c6d7e8","bootID":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0","kernelVersion":"6.1.115","osImage":"Bottlerocket OS 1.30.0 (aws-k8s-1.36)","containerRuntimeVersion":"containerd://1.7.24+bottlerocket","kubeletVersion":"v1.36.0-eks-7f9249a","kubeProxyVersion":"","operatingSystem":"linux","architecture":"amd64"},
"images":[{"names":["registry.example.com/shop/web@sha256:2f1e0a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7","registry.example.com/shop/web:1.42.0"],"sizeBytes":123456789},{"names":["public.ecr.aws/eks-distro/kubernetes/pause@sha256:1cb1a8c6f5e4d3b2a1908f7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a29","public.ecr.aws/eks-distro/kubernetes/pause:3.10"],"sizeBytes":299513}],
"volumesInUse":["kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f60718"],"volumesAttached":[{"name":"kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f60718","devicePath":""}],
"runtimeHandlers":[{"name":"runc","features":{"recursiveReadOnlyMounts":true,"userNamespaces":true}},{"name":"","features":{"recursiveReadOnlyMounts":true,"userNamespaces":true}}],
"features":{"supplementalGroupsPolicy":true}}}`

// BenchmarkCachedNode reports the heap a node of apiNode takes in the
// informer cache (B/node), for 5,000 nodes held at once: with what the
// cache dropped before trimNode (managedFields, images, kubectl's copy),
// trimmed, and as the cache keeps them (trimmed, the strings nodes repeat
// interned).
func BenchmarkCachedNode(b *testing.B) {
	const nodes = 5000
	raw := make([][]byte, nodes)
	for i := range raw {
		r := strings.NewReplacer("10-0-3-17", fmt.Sprintf("10-0-%d-%d", i/250, i%250), "10.0.3.17", fmt.Sprintf("10.0.%d.%d", i/250, i%250),
			"0a1b2c3d4e5f60718", fmt.Sprintf("%017x", i), "5b1e8c2a-7d3f-4e6a-9b0c-1d2e3f4a5b6c", fmt.Sprintf("5b1e8c2a-7d3f-4e6a-9b0c-%012d", i),
			"ec2a1b2c3d4e5f60718293a4b5c6d7e8", fmt.Sprintf("ec2%029d", i), "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", fmt.Sprintf("0f1e2d3c-4b5a-6978-8796-%012d", i),
			"10.244.7.0/24", fmt.Sprintf("10.%d.%d.0/24", 100+i/250, i%250))
		raw[i] = []byte(r.Replace(apiNode))
	}
	trims := []struct {
		name string
		trim func() func(*corev1.Node) error
	}{
		{"before", func() func(*corev1.Node) error {
			return func(n *corev1.Node) error {
				n.ManagedFields, n.Status.Images = nil, nil
				delete(n.Annotations, corev1.LastAppliedConfigAnnotation)
				return nil
			}
		}},
		{"trimmed", byTrimmer[corev1.Node](false)},
		{"shared", byTrimmer[corev1.Node](true)},
	}
	for _, tr := range trims {
		b.Run(tr.name, func(b *testing.B) { heldBytes(b, raw, tr.trim, "B/node") })
	}
}

// byTrimmer returns a new trim through a trimmer of its own, that shares
// parts (newTrimmer) or not.
func byTrimmer[T any](share bool) func() func(*T) error {
	return func() func(*T) error {
		t := &trimmer{}
		if share {
			t = newTrimmer()
		}
		return func(o *T) error { _, err := t.trim(o); return err }
	}
}

// heldBytes decodes every object of raw and trims it (with a new trim
// each round, so that nothing is shared across rounds), holds them all
// at once, and reports the heap they take, per object, as unit.
func heldBytes[T any](b *testing.B, raw [][]byte, newTrim func() func(*T) error, unit string) {
	var per float64
	for b.Loop() {
		trim := newTrim()
		held := make([]*T, len(raw))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range held {
			obj := new(T)
			if err := json.Unmarshal(raw[i], obj); err != nil {
				b.Fatal(err)
			}
			if err := trim(obj); err != nil {
				b.Fatal(err)
			}
			held[i] = obj
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(raw))
		runtime.KeepAlive(held)
		runtime.KeepAlive(trim)
	}
	b.ReportMetric(per, unit)
}
