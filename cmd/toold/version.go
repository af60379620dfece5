package main

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version and revision are stamped at build time by the Makefile and the
// Dockerfile (-ldflags "-X main.version=... -X main.revision=...").
var (
	version  = "dev"
	revision = ""
)

func versionString() string {
	rev := revision
	if rev == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					rev = s.Value
				}
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return version
	}
	return version + " (" + rev + ")"
}

// buildInfoCollector exports toold_build_info{version,revision,goversion} 1.
func buildInfoCollector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "toold_build_info",
		Help:        "Always 1; labels say which toold build is running.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()}})
	g.Set(1)
	return g
}
