package oauth

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	tokens  *prometheus.CounterVec
	fetches *prometheus.CounterVec
	cached  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		tokens: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_oauth_tokens_total",
			Help: "Bearer tokens verified (not from the cache), by outcome: valid, invalid, unavailable (the issuer could not be asked)."},
			[]string{"outcome"}),
		fetches: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_oauth_issuer_requests_total",
			Help: "Requests to trusted issuers, by issuer, what was asked (discovery, jwks, introspection) and outcome (ok, error)."},
			[]string{"issuer", "what", "outcome"}),
		cached: f.NewCounter(prometheus.CounterOpts{Name: "toold_oauth_tokens_cached_total",
			Help: "Bearer tokens accepted from the cache of verified tokens."}),
	}
}

func (m *metrics) fetch(issuer, what string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.fetches.WithLabelValues(issuer, what, outcome).Inc()
}
