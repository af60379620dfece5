// Package deploy holds toold's Kubernetes deployment: a kustomize base
// (base/), examples for what an overlay adds (examples/), and the tests that
// hold them, the Dockerfile and the Prometheus rules and Grafana dashboard to
// the toold binary built from this module. It has no Go API; the tests are
// the point:
//
//	go test ./deploy/
package deploy
