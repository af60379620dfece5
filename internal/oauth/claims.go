package oauth

import (
	"cmp"
	"slices"
	"time"

	"github.com/toold/toold/internal/auth"
)

// roleValues is the role mapping: each role's scope (or claim) values, the
// default "toold:<role>" for a role the configuration leaves out.
func roleValues(configured map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, r := range auth.Roles {
		if v, ok := configured[string(r)]; ok {
			out[string(r)] = v
		} else {
			out[string(r)] = []string{"toold:" + string(r)}
		}
	}
	return out
}

// ScopeFor is the scope a client asks for to hold role (the first value
// the mapping grants it by), as a 403's insufficient_scope names it.
func (is *issuer) scopeFor(r auth.Role) string {
	if v := is.roles[string(r)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// checkClaims applies the issuer's policy to verified claims: iss, aud
// (RFC 8707: the token must be for this resource), exp, nbf, iat, and a
// usable sub. It returns the time the token stops being valid.
func (is *issuer) checkClaims(c claimSet, now time.Time) (time.Time, error) {
	if iss := c.str("iss"); iss != is.cfg.Issuer {
		return time.Time{}, invalid("the token's issuer %q is not %q", clip(iss), is.cfg.Issuer)
	}
	if !c.hasAudience(is.cfg.Audience) {
		return time.Time{}, invalid("the token was not issued for this resource (its aud does not name %q)", is.cfg.Audience)
	}
	exp, err := c.checkTimes(now, is.cfg.Skew)
	if err != nil {
		return time.Time{}, err
	}
	if !auth.ValidSubject(c.str("sub")) {
		return time.Time{}, invalid("the token's sub is missing or not a usable name")
	}
	return exp, nil
}

// principal maps verified claims to the caller: the identity (sub, iss,
// the acting client, the act claim's actor), the roles its scopes and
// RolesClaim values grant, and its tools.
func (is *issuer) principal(c claimSet) *auth.Principal {
	id := auth.Identity{Issuer: is.cfg.Issuer, Subject: c.str("sub"),
		Client: printable(cmp.Or(c.str("client_id"), c.str("azp"))), Actor: printable(c.actor()), Groups: is.groups(c)}
	values := c.scopes()
	if is.cfg.RolesClaim != "" {
		values = append(values, c.values(is.cfg.RolesClaim, false)...)
	}
	var roles []auth.Role
	for _, r := range auth.Roles {
		for _, v := range is.roles[string(r)] {
			if slices.Contains(values, v) {
				roles = append(roles, r)
				break
			}
		}
	}
	return auth.NewTokenPrincipal(id, is.tools(), is.narrow(c), roles)
}

// tools are the issuer's tool patterns: every tool unless configured.
func (is *issuer) tools() []string {
	if len(is.cfg.Tools) == 0 {
		return []string{"*"}
	}
	return is.cfg.Tools
}

// narrow is what the tool_claims mapping gives the token: nil when none
// is configured (the issuer's tools apply as they are), else the patterns
// of every entry the token matches, possibly none.
func (is *issuer) narrow(c claimSet) []string {
	if len(is.cfg.ToolClaims) == 0 {
		return nil
	}
	out := []string{}
	for _, tc := range is.cfg.ToolClaims {
		if slices.Contains(c.values(tc.Claim, tc.Claim == "scope" || tc.Claim == "scp"), tc.Value) {
			out = append(out, tc.Tools...)
		}
	}
	return out
}

// maxGroups bounds the groups a token brings: they ride with its
// executions and every policy decision reads them.
const maxGroups = 256

// groups are the subject's groups (GroupsClaim, default "groups"): the
// claim's printable values, at most maxGroups of them.
func (is *issuer) groups(c claimSet) []string {
	claim := cmp.Or(is.cfg.GroupsClaim, "groups")
	if claim == "-" {
		return nil
	}
	var out []string
	for _, g := range c.values(claim, false) {
		if printable(g) != "" && len(out) < maxGroups {
			out = append(out, g)
		}
	}
	return out
}

// printable keeps a client or actor name that can be shown as it is, and
// drops any other.
func printable(s string) string {
	if !auth.ValidSubject(s) {
		return ""
	}
	return s
}
