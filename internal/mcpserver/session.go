package mcpserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Sessions over HTTP. /mcp is stateless — any replica answers any request —
// so toold keeps nothing of a client's initialize. Yet an older client's
// capabilities decide whether toold may ask it things (an elicitation
// goes only to a client that declared it), and its later requests carry
// none. So toold hands the client what it must remember, signed, as the
// session id MCP's Streamable HTTP lets a server give at initialize: the
// client sends it with every request, and any replica whose secret is the
// same reads it (Options.SessionSecret). It is given only where there is
// something to remember (the client can be asked); an id toold cannot
// read — another secret, a forgery, another caller's — counts as none:
// the client is then never asked, and told in text instead.

// sessionHeader is Streamable HTTP's session header.
const sessionHeader = "Mcp-Session-Id"

// sessionKeys signs and reads session ids.
type sessionKeys struct{ key []byte }

func newSessionKeys(secret []byte) *sessionKeys {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("toold mcp session\x00"))
	return &sessionKeys{key: h.Sum(nil)}
}

func (k *sessionKeys) mac(caller string, payload []byte) []byte {
	h := hmac.New(sha256.New, k.key)
	h.Write([]byte(caller))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum(nil)[:16]
}

// issue is the session id of the caller's client with caps; "" when there
// is nothing to remember.
func (k *sessionKeys) issue(caller string, caps clientCaps) string {
	if !caps.Elicitation && !caps.Sampling && !caps.URL {
		return ""
	}
	payload, err := json.Marshal(caps)
	if err != nil {
		return ""
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(k.mac(caller, payload))
}

// read is what the session id says of the caller's client.
func (k *sessionKeys) read(caller, id string) (clientCaps, bool) {
	p, m, ok := strings.Cut(id, ".")
	if !ok || len(id) > 512 {
		return clientCaps{}, false
	}
	// Strict: an encoding's unused trailing bits must be zero, or ids
	// that differ in their last character would read as the same one.
	enc := base64.RawURLEncoding.Strict()
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, k.mac(caller, payload)) {
		return clientCaps{}, false
	}
	var caps clientCaps
	if json.Unmarshal(payload, &caps) != nil {
		return clientCaps{}, false
	}
	return caps, true
}
