package main

import (
	"fmt"
)

// gcPercents are the settings the gc scenario compares: Go's default and
// the larger ones toold could choose for itself (cmd/toold/gctune.go).
var gcPercents = []int{100, 200, 400, 800}

// gcTuning measures what toold's GC percent costs and gives: one toold per
// setting (GOGC in its environment, which toold leaves in force), the same
// generator alternating between them over REST and /mcp, each toold's CPU
// per call, and its RSS idle, at the end and at its peak.
func gcTuning(o options, bin, dir string, pinned bool) error {
	var servers []*server
	var targets []target
	idle := map[*server]int64{}
	for _, p := range gcPercents {
		td, err := startToold(bin, dir, fmt.Sprintf("gogc%d", p), "tools:\n  echo: {enabled: true}\n", pinned, fmt.Sprintf("GOGC=%d", p))
		if err != nil {
			return err
		}
		defer td.stop()
		idle[td] = td.rss()
		servers = append(servers, td, td)
		targets = append(targets,
			target{fmt.Sprintf("GOGC=%d REST", p), td.addr, request(td.addr, "/tools/echo/execute", echoBody), restOK},
			target{fmt.Sprintf("GOGC=%d /mcp", p), td.addr, requestWith("POST", td.addr, "/mcp", mcpCall("echo"), mcpHeaders...), mcpOK})
	}
	_, around, cpuCol := serverCPU(servers)
	_, err := compareAround(o, "GC percent: toold's echo over REST and /mcp, one toold per setting", targets, around, cpuCol,
		column{"req/s vs GOGC=100", func(i int, total []*stats) string {
			return fmt.Sprintf("%.0f%%", 100*total[i].rate()/total[i%2].rate())
		}},
	)
	if err != nil {
		return err
	}
	const mib = 1 << 20
	fmt.Println("\n| setting | RSS idle | RSS after | RSS peak |")
	fmt.Println("|---|---|---|---|")
	for i, p := range gcPercents {
		td := servers[2*i]
		fmt.Printf("| GOGC=%d | %.1f MiB | %.1f MiB | %.1f MiB |\n", p, float64(idle[td])/mib, float64(td.rss())/mib, float64(td.peakRSS())/mib)
	}
	return nil
}
