package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"
)

// serveBare is the baseline: a plain net/http server that decodes the JSON
// body and encodes it back, as small as a JSON endpoint gets.
func serveBare() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("bare listening on http://%s\n", ln.Addr())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.Serve(ln))
}
