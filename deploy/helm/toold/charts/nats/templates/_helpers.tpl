{{/*
The cluster's name: "<release>-nats", as deploy/nats names it "toold-nats"
for the release "toold". The pods' instance label is this name too, so the
selectors and the alert texts of the kustomize manifests hold for both.
*/}}
{{- define "nats.fullname" -}}
{{- printf "%s-nats" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nats.selectorLabels" -}}
app.kubernetes.io/name: nats
app.kubernetes.io/instance: {{ include "nats.fullname" . }}
{{- end -}}

{{- define "nats.labels" -}}
{{ include "nats.selectorLabels" . }}
app.kubernetes.io/part-of: toold
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The toold pods' selector labels (the parent chart's). */}}
{{- define "nats.clientLabels" -}}
app.kubernetes.io/name: toold
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
