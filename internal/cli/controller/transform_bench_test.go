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
		{"trimmed", func() func(*corev1.Pod) error {
			t := &trimmer{}
			return func(p *corev1.Pod) error { _, err := t.trim(p); return err }
		}},
		{"shared", func() func(*corev1.Pod) error {
			t := newTrimmer()
			return func(p *corev1.Pod) error { _, err := t.trim(p); return err }
		}},
	}
	for _, tr := range trims {
		b.Run(tr.name, func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				trim := tr.trim()
				held := make([]*corev1.Pod, pods)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := range held {
					p := &corev1.Pod{}
					if err := json.Unmarshal(raw[i], p); err != nil {
						b.Fatal(err)
					}
					if err := trim(p); err != nil {
						b.Fatal(err)
					}
					held[i] = p
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPod = float64(after.HeapAlloc-before.HeapAlloc) / pods
				runtime.KeepAlive(held)
				runtime.KeepAlive(trim)
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
}
