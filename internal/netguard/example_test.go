package netguard_test

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/toold/toold/internal/netguard"
)

// Every outbound client takes its HTTP client (or, for another protocol,
// its DialContext) from a Guard built from the policy its config gives.
func Example() {
	g, err := netguard.New(netguard.Policy{
		Allow: []string{"10.20.0.0/16", "mcp.internal"}, // what may be reached besides the public internet
	})
	if err != nil {
		panic(err)
	}
	client := g.Client() // every request, redirect and connection checked; contexts bound them
	_ = client

	for _, raw := range []string{"https://api.example.com/v1", "https://169.254.169.254/latest/meta-data/",
		"http://api.example.com/", "https://0x7f.1/", "https://mcp.internal/mcp"} {
		u, _ := url.Parse(raw)
		err := g.CheckURL(u)
		fmt.Println(raw, errors.Is(err, netguard.ErrRefused))
	}
	// Output:
	// https://api.example.com/v1 false
	// https://169.254.169.254/latest/meta-data/ true
	// http://api.example.com/ true
	// https://0x7f.1/ true
	// https://mcp.internal/mcp false
}
