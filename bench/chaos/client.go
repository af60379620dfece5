//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// answer is one HTTP answer as the checks need it: the status, the
// headers that matter and the envelope's fields.
type answer struct {
	status     int // 0: no answer (refused, reset, timed out)
	retryAfter string
	location   string
	replayed   bool
	body       []byte
	env        envelope
}

// envelope is the part of toold's envelope (and of a batch's document)
// the checks read.
type envelope struct {
	Status      string          `json:"status"`
	ExecutionID string          `json:"execution_id"`
	RequestID   string          `json:"request_id"`
	Data        json.RawMessage `json:"data"`
	Error       *struct {
		Type, Code, Message string
	} `json:"error"`
	SuccessCount *int `json:"success_count"`
}

func (a *answer) code() string {
	if a.env.Error != nil {
		return a.env.Error.Code
	}
	return ""
}

// client speaks to the replicas with one key.
type client struct {
	hc  *http.Client
	key string
}

func newClient(key string) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		ResponseHeaderTimeout: 40 * time.Second}
	return &client{hc: &http.Client{Transport: tr, Timeout: 45 * time.Second}, key: key}
}

// do sends one request; headers are name, value pairs.
func (c *client) do(method, url, body string, headers ...string) *answer {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return &answer{}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &answer{}
	}
	defer resp.Body.Close()
	a := &answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), location: resp.Header.Get("Location"),
		replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	a.body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = json.Unmarshal(a.body, &a.env)
	return a
}
