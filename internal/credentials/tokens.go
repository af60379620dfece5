package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
)

// Token is what an OAuth connection holds for one principal: the tokens
// the downstream's authorization server issued, and what they are for.
// It lives only sealed in the store, and in the memory of the replica
// using it.
type Token struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Scopes the authorization server granted (or, when it said nothing,
	// those asked for).
	Scopes []string `json:"scopes,omitempty"`
	// Issuer is the authorization server, ClientID the client toold was
	// there, Resource the resource indicator the tokens are for.
	Issuer   string `json:"issuer,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	Resource string `json:"resource,omitempty"`
	// ConnectedAt is when the principal authorized; RefreshedAt when the
	// tokens were last refreshed.
	ConnectedAt time.Time `json:"connected_at"`
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
}

// Connection is an OAuth connection as GET /connections lists it: never a
// token.
type Connection struct {
	Name        string    `json:"name"`
	Scopes      []string  `json:"scopes"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	Refreshable bool      `json:"refreshable"`
	ConnectedAt time.Time `json:"connected_at,omitzero"`
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
	Issuer      string    `json:"issuer,omitempty"`
}

// View is the token as a listing shows it.
func (t *Token) View(name string) Connection {
	scopes := t.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return Connection{Name: name, Scopes: scopes, ExpiresAt: t.Expiry, Refreshable: t.RefreshToken != "",
		ConnectedAt: t.ConnectedAt, RefreshedAt: t.RefreshedAt, Issuer: t.Issuer}
}

// Tokens returns the principal's tokens of a connection and their
// revision (for SaveTokens' compare-and-set); ErrMissing when the
// principal has not connected. principal is Principal's name.
func (v *Vault) Tokens(ctx context.Context, principal, connection string) (*Token, uint64, error) {
	plain, rev, err := v.get(ctx, KindOAuth, principal, connection)
	if errors.Is(err, v.opts.NotFound) {
		return nil, 0, ErrMissing
	}
	if err != nil {
		return nil, 0, err
	}
	var t Token
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, 0, fmt.Errorf("credentials: a stored connection is malformed: %w", err)
	}
	return &t, rev, nil
}

// ErrChanged is a SaveTokens whose revision another writer (a replica
// refreshing the same tokens) moved first: read them again.
var ErrChanged = errors.New("credentials: the connection changed since it was read")

// SaveTokens stores a principal's tokens of a connection: at rev (what
// Tokens returned; ErrChanged when another writer moved it), or whatever
// was there when rev is 0.
func (v *Vault) SaveTokens(ctx context.Context, principal, connection string, t *Token, rev uint64) (uint64, error) {
	plain, err := json.Marshal(t)
	if err != nil {
		return 0, err
	}
	r, err := v.put(ctx, KindOAuth, principal, connection, plain, rev, false)
	if errors.Is(err, v.opts.Conflict) || rev != 0 && errors.Is(err, v.opts.NotFound) {
		return 0, ErrChanged
	}
	return r, err
}

// DeleteTokens forgets a principal's tokens of a connection.
func (v *Vault) DeleteTokens(ctx context.Context, principal, connection string) error {
	return v.del(ctx, KindOAuth, principal, connection)
}

// Connections lists who's OAuth connections, without their tokens.
func (v *Vault) Connections(ctx context.Context, who *auth.Identity) ([]Connection, error) {
	p, err := v.principal(who)
	if err != nil {
		return nil, err
	}
	names, err := v.names(ctx, KindOAuth, p)
	if err != nil {
		return nil, err
	}
	out := []Connection{}
	for _, n := range names {
		t, _, err := v.Tokens(ctx, p, n)
		if errors.Is(err, ErrMissing) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t.View(n))
	}
	return out, nil
}

// Holders lists the principals (Principal's names) connected to a
// connection.
func (v *Vault) Holders(ctx context.Context, connection string) ([]string, error) {
	return v.holders(ctx, KindOAuth, connection)
}

// PrincipalOf is who's vault name, refusing the anonymous caller where
// the vault does (ErrAnonymous).
func (v *Vault) PrincipalOf(who *auth.Identity) (string, error) { return v.principal(who) }

// Used tells the audit hook that who used a credential.
func (v *Vault) Used(ctx context.Context, who *auth.Identity, kind, name string) {
	if v.opts.OnUse != nil {
		v.opts.OnUse(ctx, who, kind, name)
	}
}

// Lister is the principal whose connection lists a per-user server's
// tools (kept in the store, so every replica and every restart lists with
// the same one); "" when none is recorded.
func (v *Vault) Lister(ctx context.Context, connection string) (string, error) {
	plain, _, err := v.get(ctx, kindLister, "", connection)
	if errors.Is(err, v.opts.NotFound) {
		return "", nil
	}
	return string(plain), err
}

// SetLister records the principal that lists a per-user server.
func (v *Vault) SetLister(ctx context.Context, connection, principal string) error {
	_, err := v.put(ctx, kindLister, "", connection, []byte(principal), 0, false)
	return err
}

// Client is a client registered dynamically (RFC 7591) at a connection's
// authorization server, shared by every replica.
type Client struct {
	Issuer      string `json:"issuer"`
	RedirectURI string `json:"redirect_uri"`
	ID          string `json:"client_id"`
	Secret      string `json:"client_secret,omitempty"`
}

// RegisteredClient returns the connection's registered client, or
// ErrMissing.
func (v *Vault) RegisteredClient(ctx context.Context, connection string) (*Client, error) {
	plain, _, err := v.get(ctx, kindClient, "", connection)
	if errors.Is(err, v.opts.NotFound) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, err
	}
	var c Client
	return &c, json.Unmarshal(plain, &c)
}

// SaveClient records the connection's registered client.
func (v *Vault) SaveClient(ctx context.Context, connection string, c *Client) error {
	plain, _ := json.Marshal(c)
	_, err := v.put(ctx, kindClient, "", connection, plain, 0, false)
	return err
}

// SaveFlow records an authorization in progress under id, for ttl: what
// the callback needs (sealed, since it holds the PKCE verifier).
func (v *Vault) SaveFlow(ctx context.Context, id string, flow []byte, ttl time.Duration) error {
	_, err := v.opts.KV.CreateTTL(ctx, v.key(kindFlow, "", id), v.opts.Keys.Seal(kindFlow, "", id, flow), ttl)
	return err
}

// TakeFlow returns the authorization in progress under id and removes it,
// atomically: of two callbacks with the same state, one gets it
// (ErrMissing for the other, and for an id never made or expired).
func (v *Vault) TakeFlow(ctx context.Context, id string) ([]byte, error) {
	k := v.key(kindFlow, "", id)
	sealed, rev, err := v.opts.KV.Get(ctx, k)
	if errors.Is(err, v.opts.NotFound) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, err
	}
	if err := v.opts.KV.DeleteAt(ctx, k, rev); err != nil {
		if errors.Is(err, v.opts.Conflict) || errors.Is(err, v.opts.NotFound) {
			return nil, ErrMissing
		}
		return nil, err
	}
	plain, _, err := v.opts.Keys.Open(kindFlow, "", id, sealed)
	return plain, err
}

// SecretHolders lists the principals (Principal's names) holding a secret
// named name.
func (v *Vault) SecretHolders(ctx context.Context, name string) ([]string, error) {
	return v.holders(ctx, KindSecret, name)
}

// IdentityOf is the identity a vault principal name stands for, as far as
// its name says (its kind and name; nil for the anonymous caller): for
// work done in the background as a principal (listing a per-user
// server's tools with a connected principal's credential).
func IdentityOf(principal string) *auth.Identity {
	kind, name, _ := strings.Cut(principal, ":")
	if kind == auth.KindAnonymous {
		return nil
	}
	return &auth.Identity{Kind: kind, Name: name}
}
