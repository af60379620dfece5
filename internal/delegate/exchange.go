package delegate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
)

// Token types of RFC 8693 §3.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
)

// exchanged is who's token for the downstream by token exchange: cached
// per principal until it is about to expire; failed is one the downstream
// refused (exchange again).
func (c *Connection) exchanged(ctx context.Context, who *auth.Identity, failed string) (*Credential, error) {
	p, err := c.m.opts.Vault.PrincipalOf(who)
	if err != nil {
		return nil, err
	}
	if v, ok := c.cache.Load(p); ok {
		if cr := v.(*Credential); cr.fresh(c.m.now()) && cr.Token != failed {
			return cr, nil
		}
	}
	defer c.lock(p)()
	if v, ok := c.cache.Load(p); ok {
		if cr := v.(*Credential); cr.fresh(c.m.now()) && cr.Token != failed {
			return cr, nil
		}
	}
	subject := InboundToken(ctx)
	if subject == "" {
		if failed != "" {
			return nil, nil
		}
		return nil, &Refused{Message: fmt.Sprintf("the connection %q exchanges the caller's own access token (RFC 8693), and this call "+
			"carries none: call with an OAuth access token toold accepts (auth.oauth), synchronously", c.d.Name)}
	}
	x := c.d.Exchange
	md, err := c.exchangeMetadata(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {grantTokenExchange}, "subject_token": {subject}, "subject_token_type": {tokenTypeAccess},
		"requested_token_type": {tokenTypeAccess}}
	if x.Audience != "" {
		form.Set("audience", x.Audience)
	}
	if x.Resource != "" {
		form.Set("resource", x.Resource)
	}
	if len(x.Scopes) > 0 {
		form.Set("scope", joinScopes(x.Scopes))
	}
	g, err := requestToken(ctx, c.d.Client, md.TokenEndpoint, clientAuth{id: x.ClientID, secret: x.ClientSecret}, form, c.m.now)
	var te *TokenError
	if errors.As(err, &te) {
		return nil, &Refused{Message: fmt.Sprintf("the token exchange for %q was refused: %s", c.d.Name, te.Error())}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: exchanging a token for %q: %v", ErrUnavailable, c.d.Name, err)
	}
	cr := &Credential{Token: g.AccessToken, Header: "Bearer " + g.AccessToken, Expiry: g.Expiry}
	if cr.Expiry.IsZero() {
		cr.Expiry = c.m.now().Add(5 * time.Minute) // unknown lifetime: ask again soon rather than never
	}
	c.cache.Store(p, cr)
	c.m.opts.Vault.Used(ctx, who, "token_exchange", c.d.Name)
	return cr, nil
}

// exchangeMetadata is the exchange issuer's metadata (PKCE is not asked
// of it: no browser takes part).
func (c *Connection) exchangeMetadata(ctx context.Context) (*ServerMetadata, error) {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	if c.meta != nil {
		return c.meta, nil
	}
	if c.m.now().Sub(c.metaFailed) < 5*time.Second {
		return nil, fmt.Errorf("%w (the last attempt failed a moment ago)", ErrUnavailable)
	}
	var errs []error
	for _, u := range serverMetadataURLs(c.d.Exchange.Issuer) {
		b, err := getDoc(ctx, c.d.Client, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		md, err := parseExchangeMetadata(b, c.d.Exchange.Issuer, c.d.AllowHTTP)
		if err != nil {
			c.metaFailed = c.m.now()
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		c.meta = md
		return md, nil
	}
	c.metaFailed = c.m.now()
	return nil, fmt.Errorf("%w: %v", ErrUnavailable, errors.Join(errs...))
}

func parseExchangeMetadata(b []byte, issuer string, allowHTTP bool) (*ServerMetadata, error) {
	md, err := parseServerMetadata(b, issuer, allowHTTP, false)
	if err == nil && len(md.GrantTypesSupported) > 0 && !slices.Contains(md.GrantTypesSupported, grantTokenExchange) {
		return nil, fmt.Errorf("the issuer %s does not list token exchange among its grant types", issuer)
	}
	return md, err
}

// passthrough is the caller's own token, forwarded only when its audience
// names the downstream: toold never sends a token issued for itself (or
// for another downstream) to a third party.
func (c *Connection) passthrough(ctx context.Context, who *auth.Identity) (*Credential, error) {
	t := InboundToken(ctx)
	p := credentials.Principal(who)
	if t == "" { // a request of the caller's session that no call made (its stream): the token the caller last came with
		if v, ok := c.cache.Load(p); ok {
			if cr := v.(*Credential); cr.fresh(c.m.now()) {
				return cr, nil
			}
		}
	}
	if t == "" {
		return nil, &Refused{Message: fmt.Sprintf("the connection %q forwards the caller's own access token, and this call carries none: "+
			"call with an OAuth access token issued for %s", c.d.Name, c.d.URL)}
	}
	if !c.audienceNamesDownstream(audiences(t)) {
		return nil, &Refused{Message: fmt.Sprintf("the caller's token is not issued for %s (its aud does not name it): toold forwards a token "+
			"only to the downstream it was issued for", c.d.URL)}
	}
	cr := &Credential{Token: t, Header: "Bearer " + t, Expiry: expiry(t)}
	c.cache.Store(p, cr)
	return cr, nil
}

// audienceNamesDownstream: an audience is the downstream's URL, its
// origin, or a prefix of it ending at a path boundary.
func (c *Connection) audienceNamesDownstream(auds []string) bool {
	target, err := url.Parse(c.d.URL)
	if err != nil {
		return false
	}
	for _, a := range auds {
		u, err := url.Parse(a)
		if err != nil || u.Scheme != target.Scheme || !strings.EqualFold(u.Host, target.Host) || u.RawQuery != "" || u.Fragment != "" {
			continue
		}
		p := strings.TrimSuffix(u.EscapedPath(), "/")
		tp := target.EscapedPath()
		if p == "" || tp == p || strings.HasPrefix(tp, p+"/") {
			return true
		}
	}
	return false
}
