// Package api carries toold's HTTP contract, api/openapi.yaml, into the
// binary so GET /openapi.yaml serves exactly the file tests hold the server to.
package api

import _ "embed"

// OpenAPI is the contents of openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
