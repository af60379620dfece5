// Command fakeapi serves the stand-in for the APIs of examples/http.yaml on
// loopback; see the example's header for how toold is pointed at it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/toold/toold/examples/standins/fakeapi"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8089", "address to listen on (keep it on loopback)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("fake API on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: fakeapi.Handler(), ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.Serve(ln))
}
