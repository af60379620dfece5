package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
)

// introspect asks the issuer about an opaque token (RFC 7662). The answer
// must say active; an iss it holds must be the issuer; its aud must name
// this resource — an answer without aud is refused unless the issuer's
// introspection.audience_optional says the IdP judged the audience itself
// (it answers only the clients a token is for, as RFC 7662 §4 allows); a
// sub is required. An active answer is trusted for cacheFor at most, and
// never past its exp.
func (is *issuer) introspect(ctx context.Context, raw string) (*auth.Principal, time.Time, error) {
	endpoint := is.cfg.Introspection.URL
	if endpoint == "" {
		d, err := is.metadata(ctx)
		if err != nil {
			return nil, time.Time{}, err
		}
		if endpoint = d.IntrospectionEndpoint; endpoint == "" {
			return nil, time.Time{}, fmt.Errorf("%w: the issuer's metadata names no introspection_endpoint", errUnavailable)
		}
	}
	c, err := is.postIntrospection(ctx, endpoint, raw)
	is.m.fetch(is.cfg.Issuer, "introspection", err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	if active, _ := c["active"].(bool); !active {
		return nil, time.Time{}, invalid("the issuer says the token is not active")
	}
	if iss := c.str("iss"); iss != "" && iss != is.cfg.Issuer {
		return nil, time.Time{}, invalid("the token's issuer %q is not %q", clip(iss), is.cfg.Issuer)
	}
	if _, ok := c["aud"]; !ok && !is.cfg.Introspection.AudienceOptional {
		return nil, time.Time{}, invalid("the issuer's introspection answer names no aud, so nothing says the token was issued for %q "+
			"(set auth.oauth.introspection.audience_optional: true only if the issuer answers just the clients a token is for)", is.cfg.Audience)
	}
	if _, ok := c["aud"]; ok && !c.hasAudience(is.cfg.Audience) {
		return nil, time.Time{}, invalid("the token was not issued for this resource (its aud does not name %q)", is.cfg.Audience)
	}
	now := is.now()
	until := now.Add(is.cacheFor)
	if _, ok, _ := c.time("exp"); ok {
		exp, err := c.checkTimes(now, is.cfg.Skew)
		if err != nil {
			return nil, time.Time{}, err
		}
		if exp.Before(until) {
			until = exp
		}
	}
	if !auth.ValidSubject(c.str("sub")) {
		return nil, time.Time{}, invalid("the issuer names no usable sub for the token")
	}
	return is.principal(c), until, nil
}

func (is *issuer) postIntrospection(ctx context.Context, endpoint, raw string) (claimSet, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	form := url.Values{"token": {raw}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	in := is.cfg.Introspection
	req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(in.ClientSecret))
	resp, err := is.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: %s", endpoint, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDocBytes || !json.Valid(b) {
		return nil, fmt.Errorf("POST %s: the answer is not a JSON document", endpoint)
	}
	c, err := parseClaims(b)
	if err != nil {
		return nil, fmt.Errorf("POST %s: the answer is not a JSON object", endpoint)
	}
	return c, nil
}
