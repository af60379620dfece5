// Package deploy holds toold's Kubernetes deployment: a kustomize base
// (base/), the NATS cluster it shares (nats/), examples for what an overlay
// adds (examples/), the same deployment as a Helm chart (helm/toold), and
// the tests that hold them, the Dockerfile, the Prometheus rules and
// Grafana dashboard, and the release's Homebrew formula to the toold binary
// built from this module. It has no Go API; the tests are the point:
//
//	go test ./deploy/
//
// The chart's tests need Helm (TOOLD_HELM or helm on PATH, built from
// test/helm); the formula's, a release snapshot in dist/ (make release).
package deploy
