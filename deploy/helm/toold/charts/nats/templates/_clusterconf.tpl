{{- /* deploy/nats/cluster.conf for this release's names and replicas: equal to it for the release "toold" (deploy/helm_test.go). One replica: no cluster. */ -}}
{{- define "nats.clusterConf" -}}
{{- $name := include "nats.fullname" . -}}
{{- if eq (int .Values.replicas) 1 -}}
# One server: no cluster, no routes (state.nats.replicas must be 1).
{{- else -}}
# The {{ .Values.replicas }} StatefulSet pods find each other through the headless Service
# {{ $name }}; JetStream replicates toold's streams over these routes
# (state.nats.replicas: 3). A single-node install replaces this file with an
# empty one.
cluster {
  name: {{ .Release.Name }}
  listen: 0.0.0.0:6222
  routes: [
{{- range $i := until (int .Values.replicas) }}
    nats://{{ $name }}-{{ $i }}.{{ $name }}:6222
{{- end }}
  ]
}
{{- end }}
{{- end -}}
