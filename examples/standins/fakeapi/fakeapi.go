// Package fakeapi is a local stand-in for the public APIs examples/http.yaml
// calls (GitHub's issue search, OpenWeather, wttr.in) and for the local
// model server of examples/consult.yaml (an OpenAI-compatible API): the same
// paths and the fields toold reads, with made-up data, so the examples run
// without the internet. Run it with
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
// (OpenWeather), GET /{city}?format=j1 (wttr.in), and GET /v1/models and
// POST /v1/chat/completions (a model server such as Ollama).
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", models)
	mux.HandleFunc("POST /v1/chat/completions", chat)
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

func models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{{"id": "qwen2.5-coder:7b", "object": "model"}}})
}

// chat answers every prompt with a sentence that quotes its start.
func chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "send a JSON body with messages"}})
		return
	}
	prompt := []rune(req.Messages[len(req.Messages)-1].Content)
	if len(prompt) > 60 {
		prompt = append(prompt[:60], '…')
	}
	answer := "The stand-in model read your prompt (" + string(prompt) + ") and suggests checking the lock order."
	writeJSON(w, http.StatusOK, map[string]any{"object": "chat.completion", "model": req.Model,
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": answer}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}})
}
