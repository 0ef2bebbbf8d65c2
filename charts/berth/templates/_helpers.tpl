{{/*
The name of berth's objects (Deployment, ClusterRole, Role, Services...).
The controller's leader-election lease is always "berth-controller".
*/}}
{{- define "berth.fullname" -}}
{{- default "berth-controller" .Values.fullnameOverride | trunc 55 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "berth.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: berth
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "berth.labels" -}}
{{ include "berth.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: controller
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "berth.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/*
berth keeps its placeholder and reserve pods in berth-system and its
admission policies name the account by namespace: the release must live
there.
*/}}
{{- define "berth.checkNamespace" -}}
{{- if ne .Release.Namespace "berth-system" -}}
{{- fail (printf "berth must be installed in the namespace berth-system (helm install ... --namespace berth-system --create-namespace), not %q: the controller keeps its placeholder pods there" .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* The metrics address the controller binds. */}}
{{- define "berth.metricsAddress" -}}
{{- if not .Values.metrics.enabled -}}
0
{{- else if .Values.metrics.secure -}}
:{{ .Values.metrics.port }}
{{- else -}}
127.0.0.1:{{ .Values.metrics.port }}
{{- end -}}
{{- end -}}
