{{/*
Names. The release "toold" gets exactly deploy/base's names: "toold" for
toold's objects, "toold-nats" for the bundled NATS cluster's.
*/}}
{{- define "toold.fullname" -}}
{{- if contains "toold" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-toold" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "toold.selectorLabels" -}}
app.kubernetes.io/name: toold
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "toold.labels" -}}
{{ include "toold.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "toold.natsSelectorLabels" -}}
app.kubernetes.io/name: nats
app.kubernetes.io/instance: {{ printf "%s-nats" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* An environment variable's name from a key's or an issuer's name. */}}
{{- define "toold.envName" -}}
{{- regexReplaceAll "[^A-Z0-9]+" (upper .) "_" -}}
{{- end -}}

{{/*
The variables toold's config reads from Secrets, as a list of
{env, name, key, optional} (in JSON: templates return strings). The
config (toold.config) and the Deployment's env (toold.env) are both made
from it, so each ${VAR} the config names is one the pod sets.
*/}}
{{- define "toold.secretVars" -}}
{{- $vars := list -}}
{{- range $k := .Values.auth.keys -}}
{{- $vars = append $vars (dict "env" (printf "TOOLD_%s_KEY_SHA256" (include "toold.envName" $k.name)) "name" $k.sha256From.name "key" $k.sha256From.key "optional" false "for" (printf "auth.keys %s" $k.name)) -}}
{{- end -}}
{{- range $i, $o := .Values.auth.oauth -}}
{{- with $o.introspection -}}{{- with .clientSecretFrom -}}
{{- $vars = append $vars (dict "env" (printf "TOOLD_OAUTH_%d_INTROSPECTION_SECRET" $i) "name" .name "key" .key "optional" false "for" (printf "auth.oauth[%d].introspection" $i)) -}}
{{- end -}}{{- end -}}
{{- with $o.console -}}
{{- with .clientSecretFrom -}}
{{- $vars = append $vars (dict "env" (printf "TOOLD_OAUTH_%d_CONSOLE_SECRET" $i) "name" .name "key" .key "optional" false "for" (printf "auth.oauth[%d].console" $i)) -}}
{{- end -}}
{{- with .sessionSecretFrom -}}
{{- $vars = append $vars (dict "env" (printf "TOOLD_OAUTH_%d_SESSION_SECRET" $i) "name" .name "key" .key "optional" false "for" (printf "auth.oauth[%d].console" $i)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $v := $vars -}}
{{- if hasKey $seen $v.env -}}
{{- fail (printf "%s and %s both need the variable %s: give the keys names that differ in more than case and punctuation" (get $seen $v.env) $v.for $v.env) -}}
{{- end -}}
{{- $_ := set $seen $v.env $v.for -}}
{{- end -}}
{{- toJson $vars -}}
{{- end -}}

{{/* The NATS toold connects to: {url, user, passwordFrom}. */}}
{{- define "toold.nats" -}}
{{- if .Values.nats.enabled -}}
{{- if .Values.externalNats.url -}}
{{- fail "externalNats.url is set while nats.enabled is true: set nats.enabled=false to use an external NATS, or clear externalNats.url" -}}
{{- end -}}
{{- $sc := (index .Values "config" "state" | default dict) -}}
{{- $r := (index ($sc.nats | default dict) "replicas") | default 1 | int -}}
{{- if gt $r (int .Values.nats.replicas) -}}
{{- fail (printf "config.state.nats.replicas is %d but the bundled NATS cluster has nats.replicas %d servers: a stream cannot have more replicas than servers" $r (int .Values.nats.replicas)) -}}
{{- end -}}
{{- toJson (dict "url" (printf "nats://%s-nats:4222" .Release.Name) "user" .Values.nats.auth.user "passwordFrom" .Values.nats.auth.passwordFrom "internal" true) -}}
{{- else -}}
{{- if not .Values.externalNats.url -}}
{{- fail "nats.enabled is false and externalNats.url is empty: toold's replicas need a shared NATS with JetStream; set externalNats.url (e.g. nats://nats.nats.svc:4222), or nats.enabled=true for the bundled cluster" -}}
{{- end -}}
{{- toJson (dict "url" .Values.externalNats.url "user" .Values.externalNats.user "passwordFrom" .Values.externalNats.passwordFrom "internal" false) -}}
{{- end -}}
{{- end -}}

{{/*
toold.yaml: .Values.config with what the chart owns laid over it. A key the
chart owns, set in config, is refused rather than silently replaced.
*/}}
{{- define "toold.config" -}}
{{- $c := deepCopy .Values.config -}}
{{- range $k := list "listen" "admin_listen" "workspace" "auth" -}}
{{- if hasKey $c $k -}}
{{- fail (printf "config.%s is set by the chart (listen and admin_listen from service.apiPort and service.metricsPort, workspace from workspace.mountPath, auth from auth.keys and auth.oauth): remove it from config" $k) -}}
{{- end -}}
{{- end -}}
{{- $server := $c.server | default dict -}}
{{- if hasKey $server "confirm_secret" -}}
{{- fail "config.server.confirm_secret: give it as a Secret (confirmSecretFrom), never in values" -}}
{{- end -}}
{{- $_ := set $server "confirm_secret" "${TOOLD_CONFIRM_SECRET:-}" -}}
{{- $_ = set $c "server" $server -}}
{{- $state := $c.state | default dict -}}
{{- $sn := $state.nats | default dict -}}
{{- range $k := list "url" "user" "password" "token" "credentials" -}}
{{- if hasKey $sn $k -}}
{{- fail (printf "config.state.nats.%s is set by the chart from nats (the bundled cluster) or externalNats: remove it from config" $k) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $state "replica" -}}
{{- fail "config.state.replica is set by the chart (each pod's name): remove it from config" -}}
{{- end -}}
{{- $nats := include "toold.nats" . | fromJson -}}
{{- $_ = set $sn "url" $nats.url -}}
{{- if $nats.passwordFrom.name -}}
{{- $_ = set $sn "user" $nats.user -}}
{{- $_ = set $sn "password" "${TOOLD_NATS_PASSWORD}" -}}
{{- end -}}
{{- $_ = set $state "nats" $sn -}}
{{- $_ = set $state "replica" "${POD_NAME:-}" -}}
{{- $_ = set $c "state" $state -}}
{{- $_ = set $c "listen" (printf "0.0.0.0:%d" (int .Values.service.apiPort)) -}}
{{- $_ = set $c "admin_listen" (printf "0.0.0.0:%d" (int .Values.service.metricsPort)) -}}
{{- $_ = set $c "workspace" .Values.workspace.mountPath -}}
{{- $keys := list -}}
{{- range $k := .Values.auth.keys -}}
{{- $e := dict "name" $k.name "sha256" (printf "${TOOLD_%s_KEY_SHA256}" (include "toold.envName" $k.name)) "tools" $k.tools -}}
{{- with $k.roles }}{{ $_ := set $e "roles" . }}{{ end -}}
{{- with $k.toolsets }}{{ $_ := set $e "toolsets" . }}{{ end -}}
{{- $keys = append $keys $e -}}
{{- end -}}
{{- $issuers := list -}}
{{- range $i, $o := .Values.auth.oauth -}}
{{- $e := omit $o "introspection" "console" -}}
{{- with $o.introspection -}}
{{- if hasKey . "client_secret" -}}{{- fail (printf "auth.oauth[%d].introspection.client_secret: give it as a Secret (clientSecretFrom), never in values" $i) -}}{{- end -}}
{{- $in := omit . "clientSecretFrom" -}}
{{- if .clientSecretFrom }}{{ $_ := set $in "client_secret" (printf "${TOOLD_OAUTH_%d_INTROSPECTION_SECRET}" $i) }}{{ end -}}
{{- $_ := set $e "introspection" $in -}}
{{- end -}}
{{- with $o.console -}}
{{- if or (hasKey . "client_secret") (hasKey . "session_secret") -}}{{- fail (printf "auth.oauth[%d].console: give client_secret and session_secret as Secrets (clientSecretFrom, sessionSecretFrom), never in values" $i) -}}{{- end -}}
{{- $co := omit . "clientSecretFrom" "sessionSecretFrom" -}}
{{- if .clientSecretFrom }}{{ $_ := set $co "client_secret" (printf "${TOOLD_OAUTH_%d_CONSOLE_SECRET}" $i) }}{{ end -}}
{{- if .sessionSecretFrom }}{{ $_ := set $co "session_secret" (printf "${TOOLD_OAUTH_%d_SESSION_SECRET}" $i) }}{{ end -}}
{{- $_ := set $e "console" $co -}}
{{- end -}}
{{- $issuers = append $issuers $e -}}
{{- end -}}
{{- $auth := dict -}}
{{- with $keys }}{{ $_ := set $auth "keys" . }}{{ end -}}
{{- with $issuers }}{{ $_ := set $auth "oauth" . }}{{ end -}}
{{- if not $auth -}}
{{- fail "auth.keys and auth.oauth are both empty: toold listens beyond loopback in a pod and refuses to start without a way to authenticate callers" -}}
{{- end -}}
{{- $_ = set $c "auth" $auth -}}
{{- toYaml $c -}}
{{- end -}}

{{/* The Deployment's env: the Secret variables, then the pod's own. */}}
{{- define "toold.env" -}}
{{- range $v := include "toold.secretVars" . | fromJsonArray }}
- name: {{ $v.env }}
  valueFrom:
    secretKeyRef:
      name: {{ $v.name }}
      key: {{ $v.key }}
{{- end }}
# Optional: see confirmSecretFrom in values.yaml.
- name: TOOLD_CONFIRM_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .Values.confirmSecretFrom.name }}
      key: {{ .Values.confirmSecretFrom.key }}
      optional: true
# Read once by toold and removed from its environment; optional so that a
# missing key is toold's own start-up error, which says how to make one.
- name: TOOLD_AUDIT_SIGNING_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auditSigningKeyFrom.name }}
      key: {{ .Values.auditSigningKeyFrom.key }}
      optional: true
# The replica's name in records, events and the audit log.
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- $nats := include "toold.nats" . | fromJson }}
{{- if $nats.passwordFrom.name }}
# The NATS password (state.nats.password in toold.yaml).
- name: TOOLD_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $nats.passwordFrom.name }}
      key: {{ $nats.passwordFrom.key }}
{{- end }}
# The Go GC works harder before the container hits its memory limit.
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
