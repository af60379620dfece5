// Package fakeapi is a local stand-in for the public APIs examples/http.yaml
// calls (GitHub's issue search, OpenWeather, wttr.in): the same paths and
// the fields the example's jq programs read, with made-up data, so the
// example runs without the internet. Run it with
//
//	go run ./examples/standins/cmd/fakeapi
package fakeapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Handler answers GET /search/issues (GitHub), GET /data/2.5/weather
// (OpenWeather) and GET /{city}?format=j1 (wttr.in).
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search/issues", searchIssues)
	mux.HandleFunc("GET /data/2.5/weather", weather)
	mux.HandleFunc("GET /{city}", wttr)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func searchIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if q == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
		return
	}
	n, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	n = min(max(n, 1), 3)
	items := make([]map[string]any, 0, n)
	for i := 1; i <= n; i++ {
		items = append(items, map[string]any{"number": 1000 + i, "title": "Issue " + strconv.Itoa(i) + " about " + q,
			"state": "open", "html_url": "https://github.com/example/repo/issues/" + strconv.Itoa(1000+i),
			"repository_url": "https://api.github.com/repos/example/repo", "labels": []map[string]any{{"name": "NeedsFix"}},
			"comments": i, "updated_at": "2026-11-01T10:00:00Z"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": n, "incomplete_results": false, "items": items})
}

func weather(w http.ResponseWriter, r *http.Request) {
	city, country, _ := strings.Cut(r.URL.Query().Get("q"), ",")
	writeJSON(w, http.StatusOK, map[string]any{"name": city, "sys": map[string]any{"country": country},
		"weather": []map[string]any{{"description": "light rain"}},
		"main":    map[string]any{"temp": 7.5, "feels_like": 5.0, "humidity": 81}, "wind": map[string]any{"speed": 4.1}})
}

func wttr(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("format") != "j1" {
		http.NotFound(w, r)
		return
	}
	city := r.PathValue("city")
	writeJSON(w, http.StatusOK, map[string]any{
		"current_condition": []map[string]any{{"temp_C": "8", "FeelsLikeC": "6", "humidity": "80", "windspeedKmph": "15",
			"weatherDesc": []map[string]any{{"value": "Light rain"}}}},
		"nearest_area": []map[string]any{{"areaName": []map[string]any{{"value": city}}, "country": []map[string]any{{"value": "Norway"}}}},
	})
}
