// Command toold-oidc is the OpenID Provider toold's identity tests sign in
// with: zitadel/oidc's OpenID-certified provider (pkg/op), its example
// storage and login page (example/server), on loopback.
//
// The example's storage mints opaque tokens whose audience is the client
// itself, grants no scope it does not know and signs with one key for its
// life. A resource server is tested against JWT access tokens issued for
// it (RFC 9068, RFC 8707), with the scopes and groups it maps to roles, and
// against keys that rotate; so this wrapper keeps the example's storage,
// login page and every endpoint of the library's provider, and replaces
// only what the provider asks its storage about clients and keys:
//
//   - clients come from the -config file: each with its secret, redirect
//     URIs (globs allowed, for toold's port chosen at random), the
//     audience its access tokens carry, and whether they are JWTs;
//   - an access token carries the granted scopes (claim "scope"), the
//     user's groups (claim "groups") and, after a token exchange with an
//     actor token (RFC 8693), the actor (claim "act");
//   - an introspection answer names the token's audience (aud), unless
//     the client's introspect_without_aud says to leave it out;
//   - POST /rotate makes a new signing key; ?drop=1 stops publishing the
//     old one.
//   - a client with resource_audience gets tokens for the resource its
//     authorization request names (RFC 8707), as authorization servers
//     for MCP do; one with exchange may exchange a user's token for
//     another audience without an actor (RFC 8693 delegation by a trusted
//     client); one with access_ttl gets access tokens that short-lived;
//   - POST /register registers a public client (RFC 7591), with
//     resource_audience, and the discovery document names it
//     (registration_endpoint).
//
// The example's own clients ("web", an opaque-token client whose tokens
// are checked by introspection) stay. The issuer is printed on stdout, as
// "issuer <url>", once the provider listens.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// config is the -config file.
type config struct {
	Clients []clientConfig `json:"clients"`
	Users   []userConfig   `json:"users"`
}

type clientConfig struct {
	ID     string `json:"id"`
	Secret string `json:"secret"` // empty: a public client (PKCE)
	// RedirectURIs may hold globs (path.Match), e.g.
	// "http://127.0.0.1:*/auth/callback".
	RedirectURIs []string `json:"redirect_uris"`
	// Audience is what the client's access tokens are issued for (the
	// client's id is added).
	Audience []string `json:"audience"`
	// Opaque makes the client's access tokens opaque (checked by
	// introspection) rather than JWTs.
	Opaque bool `json:"opaque"`
	// ResourceAudience makes an authorization's tokens for the resource
	// its request names (RFC 8707), instead of Audience.
	ResourceAudience bool `json:"resource_audience"`
	// Exchange lets the client exchange a user's token for one with
	// another audience without an actor token.
	Exchange bool `json:"exchange"`
	// AccessTTL is its access tokens' lifetime in seconds (default: the
	// example's five minutes).
	AccessTTL int `json:"access_ttl"`
	// IntrospectWithoutAud leaves aud out of the introspection answers
	// about the client's tokens, as the example storage (and some IdPs)
	// do; otherwise the answer names the token's audience, as most do.
	IntrospectWithoutAud bool `json:"introspect_without_aud"`
}

type userConfig struct {
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Groups   []string `json:"groups"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	file := flag.String("config", "", "clients and users (JSON)")
	flag.Parse()
	if err := run(*addr, *file); err != nil {
		fmt.Fprintln(os.Stderr, "toold-oidc:", err)
		os.Exit(1)
	}
}

func run(addr, file string) error {
	var cfg config
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("%s: %v", file, err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	issuer := "http://" + ln.Addr().String() + "/"
	st, err := newStore(cfg, issuer)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, st, logger, false)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rotate", st.rotate)
	mux.HandleFunc("POST /register", st.register)
	mux.Handle("GET /.well-known/openid-configuration", withRegistration(router, issuer))
	mux.Handle("/auth", st.rememberResource(router))
	mux.Handle("/", router)
	fmt.Println("issuer", issuer)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}

// store is the example's storage with clients, users and keys of its own.
type store struct {
	*storage.Storage
	groups map[string][]string // user id -> groups

	cmu       sync.Mutex
	clients   map[string]*client
	resources map[string]string // client id + state -> resource, until the request is made
	requested map[string]string // auth request id -> resource
	// refreshAud is the audience of a refresh token's authorization.
	refreshAud map[string][]string

	mu        sync.Mutex
	signing   *signingKey
	published []*signingKey
}

func newStore(cfg config, issuer string) (*store, error) {
	users := userStore{byID: map[string]*storage.User{}}
	s := &store{clients: map[string]*client{}, groups: map[string][]string{}, resources: map[string]string{}, requested: map[string]string{},
		refreshAud: map[string][]string{}}
	for _, u := range cfg.Users {
		users.byID[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, FirstName: u.Username,
			Email: u.Username + "@example.test", EmailVerified: true}
		s.groups[u.ID] = u.Groups
	}
	for _, c := range cfg.Clients {
		s.clients[c.ID] = &client{cfg: c}
	}
	builtin := map[string]*storage.Client{"web": storage.WebClient("web", "secret", strings.TrimSuffix(issuer, "/")+"/callback")}
	s.Storage = storage.NewStorageWithClients(users, builtin)
	key, err := newSigningKey()
	if err != nil {
		return nil, err
	}
	s.signing, s.published = key, []*signingKey{key}
	return s, nil
}

// rotate makes a new signing key: tokens signed from now on carry its kid.
// The old key stays published (tokens it signed stay valid) unless drop=1.
func (s *store) rotate(w http.ResponseWriter, r *http.Request) {
	key, err := newSigningKey()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	old := s.signing
	s.signing = key
	if r.URL.Query().Get("drop") == "1" {
		s.published = []*signingKey{key}
	} else {
		s.published = append(s.published, key)
	}
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"old": old.id, "new": key.id})
}

// SigningKey is the key tokens are signed with now.
func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signing, nil
}

// SignatureAlgorithms lists the algorithm of the current key.
func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

// KeySet is the published keys (the JWKS).
func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]op.Key, len(s.published))
	for i, k := range s.published {
		keys[i] = publicKey{k}
	}
	return keys, nil
}

// client is a configured or registered client, or nil.
func (s *store) client(id string) *client {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.clients[id]
}

// GetClientByClientID finds the configured clients, then the example's.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if c := s.client(id); c != nil {
		return c, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

// AuthorizeClientIDSecret checks a configured client's secret, or the
// example's.
func (s *store) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	if c := s.client(id); c != nil {
		if c.cfg.Secret == "" || c.cfg.Secret != secret {
			return fmt.Errorf("invalid client secret")
		}
		return nil
	}
	return s.Storage.AuthorizeClientIDSecret(ctx, id, secret)
}

// ClientCredentials lets a configured confidential client sign in as
// itself (the client_credentials grant).
func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	if c := s.client(id); c != nil {
		return c, nil
	}
	return s.Storage.ClientCredentials(ctx, id, secret)
}

// ClientCredentialsTokenRequest: the client is the subject, its token is
// for its audience.
func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c := s.client(id)
	if c == nil {
		return s.Storage.ClientCredentialsTokenRequest(ctx, id, scopes)
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: c.audience(), Scopes: scopes}, nil
}

// AuthRequestByID and AuthRequestByCode give a configured client's
// requests its audience.
func (s *store) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	return s.withAudience(s.Storage.AuthRequestByID(ctx, id))
}

// AuthRequestByCode: see AuthRequestByID.
func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	return s.withAudience(s.Storage.AuthRequestByCode(ctx, code))
}

func (s *store) withAudience(r op.AuthRequest, err error) (op.AuthRequest, error) {
	if err != nil {
		return nil, err
	}
	c := s.client(r.GetClientID())
	if c == nil {
		return r, nil
	}
	if c.cfg.ResourceAudience {
		s.cmu.Lock()
		res := s.requested[r.GetID()]
		s.cmu.Unlock()
		if res != "" {
			return audienceRequest{r, []string{res}}, nil
		}
	}
	return audienceRequest{r, c.audience()}, nil
}

// rememberResource keeps the resource an authorization request names
// (RFC 8707) by its client and state, for CreateAuthRequest.
func (s *store) rememberResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if res := q.Get("resource"); res != "" {
			s.cmu.Lock()
			s.resources[q.Get("client_id")+"\x00"+q.Get("state")] = res
			s.cmu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// CreateAuthRequest is the example's, remembering the resource the
// request named.
func (s *store) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	r, err := s.Storage.CreateAuthRequest(ctx, req, userID)
	if err != nil {
		return nil, err
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	k := req.ClientID + "\x00" + req.State
	if res, ok := s.resources[k]; ok {
		s.requested[r.GetID()] = res
		delete(s.resources, k)
	}
	return r, nil
}

// CreateAccessAndRefreshTokens is the example's, with the client's
// access_ttl. The example's storage knows its own request types only: a
// request this wrapper gave an audience is unwrapped for it, and the
// audience is remembered for the refresh token, so that refreshed tokens
// keep it.
func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	inner := r
	if u, ok := r.(interface{ unwrap() op.TokenRequest }); ok {
		inner = u.unwrap()
	}
	id, refresh, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, inner, current)
	if err == nil && refresh != "" && inner != r {
		s.cmu.Lock()
		s.refreshAud[refresh] = r.GetAudience()
		s.cmu.Unlock()
	}
	return id, refresh, s.ttl(r, exp), err
}

// TokenRequestByRefreshToken is the example's, with the audience the
// refresh token's authorization had.
func (s *store) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	r, err := s.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return nil, err
	}
	s.cmu.Lock()
	aud, ok := s.refreshAud[token]
	s.cmu.Unlock()
	if ok {
		return refreshAudience{r, aud}, nil
	}
	return r, nil
}

// refreshAudience is a refresh request with the audience its
// authorization had.
type refreshAudience struct {
	op.RefreshTokenRequest
	aud []string
}

func (r refreshAudience) GetAudience() []string   { return r.aud }
func (r refreshAudience) unwrap() op.TokenRequest { return r.RefreshTokenRequest }

// CreateAccessToken is the example's, with the client's access_ttl.
func (s *store) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, r)
	return id, s.ttl(r, exp), err
}

func (s *store) ttl(r op.TokenRequest, exp time.Time) time.Time {
	var id string
	switch r := r.(type) {
	case interface{ GetClientID() string }:
		id = r.GetClientID()
	case interface{ GetApplicationID() string }:
		id = r.GetApplicationID()
	}
	if c := s.client(id); c != nil && c.cfg.AccessTTL > 0 {
		return time.Now().Add(time.Duration(c.cfg.AccessTTL) * time.Second)
	}
	return exp
}

// register registers a public client (RFC 7591): its redirect URIs, and
// tokens for the resource its authorization requests name.
func (s *store) register(w http.ResponseWriter, r *http.Request) {
	var meta struct {
		RedirectURIs []string `json:"redirect_uris"`
		ClientName   string   `json:"client_name"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client_metadata", "error_description": "redirect_uris are required"})
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := fmt.Sprintf("dcr-%x", b)
	s.cmu.Lock()
	s.clients[id] = &client{cfg: clientConfig{ID: id, RedirectURIs: meta.RedirectURIs, ResourceAudience: true}}
	s.cmu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"client_id": id, "client_name": meta.ClientName, "redirect_uris": meta.RedirectURIs,
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
}

// withRegistration adds the registration endpoint to the discovery
// document the provider serves.
func withRegistration(next http.Handler, issuer string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var doc map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &doc) != nil {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		doc["registration_endpoint"] = strings.TrimSuffix(issuer, "/") + "/register"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
}

// SetIntrospectionFromToken answers as the example does, and names the
// token's audience unless the client asking says to leave aud out. The
// example answers only a client in the token's audience, and a configured
// client's tokens are issued for its audience (audienceRequest): so that
// is the introspecting client's audience. (The example's token keeps no
// client id for a request wrapped here, so the answer's client_id is set
// to the asker's too.)
func (s *store) SetIntrospectionFromToken(ctx context.Context, in *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	if err := s.Storage.SetIntrospectionFromToken(ctx, in, tokenID, subject, clientID); err != nil {
		return err
	}
	if c := s.client(clientID); c != nil && !c.cfg.IntrospectWithoutAud {
		in.Audience = c.audience()
		if in.ClientID == "" {
			in.ClientID = clientID
		}
	}
	return nil
}

// GetPrivateClaimsFromScopes puts the granted scopes and the user's groups
// in a JWT access token, as IdPs commonly do (RFC 9068 §2.2.3).
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if claims == nil {
		claims = map[string]any{}
	}
	claims["scope"] = strings.Join(scopes, " ")
	if g := s.groups[userID]; len(g) > 0 {
		claims["groups"] = g
	}
	return claims, nil
}

// GetPrivateClaimsFromTokenExchangeRequest adds, to the claims of
// GetPrivateClaimsFromScopes, the actor of a delegation: the subject of
// the actor token (RFC 8693 §4.1).
func (s *store) GetPrivateClaimsFromTokenExchangeRequest(ctx context.Context, r op.TokenExchangeRequest) (map[string]any, error) {
	claims, err := s.GetPrivateClaimsFromScopes(ctx, r.GetSubject(), r.GetClientID(), r.GetScopes())
	if err != nil {
		return nil, err
	}
	if actor := r.GetExchangeActor(); actor != "" {
		claims["act"] = map[string]any{"sub": actor}
	}
	return claims, nil
}

// ValidateTokenExchangeRequest accepts a delegation (an actor token
// given) to a token for the audience asked for; impersonation without an
// actor is the example's to judge.
func (s *store) ValidateTokenExchangeRequest(ctx context.Context, r op.TokenExchangeRequest) error {
	trusted := false
	if c := s.client(r.GetClientID()); c != nil {
		trusted = c.cfg.Exchange
	}
	if r.GetExchangeActor() == "" && !trusted {
		return s.Storage.ValidateTokenExchangeRequest(ctx, r)
	}
	if r.GetRequestedTokenType() == "" {
		r.SetRequestedTokenType(oidc.AccessTokenType)
	}
	r.SetCurrentScopes(r.GetScopes())
	return nil
}

// audienceRequest is an auth request whose tokens carry the client's
// audience rather than the example's (the client's id alone).
type audienceRequest struct {
	op.AuthRequest
	aud []string
}

func (r audienceRequest) GetAudience() []string   { return r.aud }
func (r audienceRequest) unwrap() op.TokenRequest { return r.AuthRequest }

// userStore holds the configured users.
type userStore struct{ byID map[string]*storage.User }

func (u userStore) GetUserByID(id string) *storage.User { return u.byID[id] }

func (u userStore) GetUserByUsername(name string) *storage.User {
	for _, user := range u.byID {
		if user.Username == name {
			return user
		}
	}
	return nil
}

func (u userStore) ExampleClientID() string { return storage.ServiceUserID }

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func newSigningKey() (*signingKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &signingKey{id: fmt.Sprintf("%x", b), key: k}, nil
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.key.PublicKey }
