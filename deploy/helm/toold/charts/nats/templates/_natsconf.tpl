{{- /* deploy/nats/nats.conf, with the values this chart takes; deploy/helm_test.go holds the two equal for the defaults. */ -}}
{{- define "nats.conf" -}}
# NATS server configuration for toold's state (deploy/nats).
# $POD_NAME and $TOOLD_NATS_PASSWORD come from the StatefulSet's environment.
server_name: $POD_NAME

# Clients (toold replicas) on 4222; monitoring and probes on 8222.
listen: 0.0.0.0:4222
http: 0.0.0.0:8222

# A client may not hold more than this in one message: toold's largest are
# audit and event batches (well under 1 MiB) and execution records.
max_payload: 4MB

jetstream {
  store_dir: /data
  # Keep below the volume's size (storage: {{ .Values.storage.size }}). toold's
  # streams reserve what state.events.max_bytes and state.audit.max_bytes
  # say (256 MiB and 1 GiB by default), times state.nats.replicas spread
  # over the three nodes.
  max_file_store: {{ .Values.maxFileStore }}
  max_memory_store: 64M
}

# toold is the only client: one user, whose password comes from a Secret
# (toold reads the same one as ${TOOLD_NATS_PASSWORD}).
authorization {
  users: [
    {user: {{ .Values.auth.user }}, password: $TOOLD_NATS_PASSWORD}
  ]
}

# Leave the cluster gracefully on SIGTERM: clients move to the other nodes
# within this time, so toold replicas see no outage during a rollout.
lame_duck_duration: 30s
lame_duck_grace_period: 5s

include ./cluster.conf
{{- end -}}
