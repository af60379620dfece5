package sanitize

import (
	"strings"
	"unicode/utf8"
)

// Assignments: "password=...", "secret: ...", "AWS_SECRET_ACCESS_KEY=...",
// "AccountKey=...;", `"api_key": "..."`, "Authorization: Bearer ...".
// Every '=' and ':' is an anchor; the name before it is classified first
// (a few byte compares), so only sensitive names look at a value. The value
// tests are what keeps source code clean: in code the right-hand side of
// "password = password" is an expression, in config it is a literal.

func (sc *scanner) scanAssignments() {
	if sc.d.anyOn(kPassword, kSecret, kAWSSecretKey, kAzureStorageKey, kGCPServiceAccount, kBearerToken, kBasicAuth) {
		for _, sep := range []byte{'=', ':'} {
			for i := indexByteFrom(sc.s, sep, 0); i >= 0; i = indexByteFrom(sc.s, sep, i+1) {
				sc.assignment(i)
			}
		}
	}
	if sc.d.on[kURLPassword] {
		sc.scanURLs()
	}
}

// nameKind is what a sensitive name says about its value.
type nameKind uint8

const (
	nameNone nameKind = iota
	namePassword
	nameSecret
	nameAWS
	nameAzure
	nameAuthorization
	nameGCPPrivateKey
)

func (sc *scanner) assignment(i int) {
	s := sc.s
	v := i + 1
	if s[i] == '=' {
		switch at(s, i-1) {
		case '=', '!', '<', '>', ':':
			return // comparison, or ":=" (seen at its ':')
		}
		switch at(s, i+1) {
		case '=':
			return
		case '>':
			v++ // "=>"
		}
	} else {
		switch {
		case at(s, i+1) == '=':
			v++ // ":="
		case at(s, i+1) == ':' || at(s, i-1) == ':' || at(s, i+1) == '/':
			return // "::" paths, IPv6, URL schemes
		}
	}
	nk, name, literal := sc.assignedName(i)
	if nk == nameNone {
		return
	}
	if literal && s[i] == '=' && upperName(name) && (is(at(s, i-1), cSpace) || is(at(s, v), cSpace)) {
		literal = false // "NAME = value" is code; a shell or .env line has no blanks
	}
	sc.assignedValue(v, nk, name, literal)
}

// assignedName classifies the name that ends before the separator at i,
// skipping blanks, a closing quote (also JSON-escaped) and a TypeScript
// '?'. literal reports a context where even a plain word is a value: a URL
// query or connection string (preceded by ?, & or ;) or an upper-case
// environment variable.
func (sc *scanner) assignedName(i int) (nameKind, string, bool) {
	s := sc.s
	k := runBack(s, i, cSpace, 8)
	if at(s, k-1) == '?' {
		k--
	}
	if q := at(s, k-1); q == '"' || q == '\'' || q == '`' {
		k--
		if at(s, k-1) == '\\' {
			k--
		}
	}
	st := runBack(s, k, cWord|cDash|cDot, 64)
	if st == k {
		return nameNone, "", false
	}
	name := s[st:k]
	nk := classifyName(name)
	if nk == nameNone {
		return nameNone, "", false
	}
	before := at(s, st-1)
	if before == '"' || before == '\'' {
		before = at(s, st-2)
	}
	query := before == '?' || before == '&' || before == ';'
	if strings.EqualFold(name, "pwd") && !query {
		return nameNone, "", false // $PWD, the working directory; ODBC's "...;PWD=x" stays
	}
	return nk, name, query || s[i] == '=' && upperName(name)
}

func upperName(n string) bool {
	for i := 0; i < len(n); i++ {
		if is(n[i], cLower) {
			return false
		}
	}
	return true
}

// classifyName folds case and drops _ - . so "DB_PASSWORD", "dbPassword"
// and "db-password" are one name, then looks at how it ends.
func classifyName(name string) nameKind {
	var buf [64]byte
	n := 0
	for i := 0; i < len(name) && n < len(buf); i++ {
		if c := name[i]; c != '_' && c != '-' && c != '.' {
			buf[n] = lower(c)
			n++
		}
	}
	b := buf[:n]
	switch {
	case ends(b, "authorization"):
		return nameAuthorization
	case ends(b, "secretaccesskey"), contains(b, "aws") && (ends(b, "secret") || ends(b, "secretkey")):
		return nameAWS
	case ends(b, "accountkey"), ends(b, "storagekey"), ends(b, "sharedaccesskey"):
		return nameAzure
	case ends(b, "password"), ends(b, "passwd"), ends(b, "passphrase"), pwdSuffix(name):
		return namePassword
	case string(b) == "privatekey" && name == "private_key":
		return nameGCPPrivateKey
	case ends(b, "secret"), ends(b, "secretkey"), ends(b, "apikey"), ends(b, "privatekey"), ends(b, "signingkey"),
		ends(b, "encryptionkey"), ends(b, "masterkey"), string(b) == "auth":
		return nameSecret
	case ends(b, "token"):
		for _, benign := range benignTokens {
			if ends(b, benign) {
				return nameNone
			}
		}
		return nameSecret
	}
	return nameNone
}

// pwdSuffix accepts "pwd" as a word of its own ("db_pwd", "dbPwd", "PWD")
// but not inside one ("FTINTRPWD", "OLDPWD").
func pwdSuffix(name string) bool {
	n := len(name)
	if n < 3 || !strings.EqualFold(name[n-3:], "pwd") {
		return false
	}
	if n == 3 {
		return true
	}
	c := name[n-4]
	return (c == '_' || c == '-' || c == '.' || name[n-3] == 'P' && is(c, cLower)) && !strings.EqualFold(name, "oldpwd")
}

func ends(b []byte, suf string) bool {
	return len(b) >= len(suf) && string(b[len(b)-len(suf):]) == suf
}

func contains(b []byte, sub string) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == sub {
			return true
		}
	}
	return false
}

// benignTokens are "...token" names that carry no credential: paging
// cursors and the like, common in API responses.
var benignTokens = []string{"nexttoken", "pagetoken", "continuationtoken", "synctoken", "cursortoken",
	"resumetoken", "paginationtoken", "cancellationtoken", "idempotencytoken", "starttoken", "endtoken",
	"lexertoken", "parsertoken", "csrftoken", "maxtoken"}

// assignedValue finds the value starting at v (after blanks) and records it.
func (sc *scanner) assignedValue(v int, nk nameKind, name string, literal bool) {
	s := sc.s
	v = run(s, v, cSpace, 8)
	if nk == nameAuthorization && sc.authorization(v) {
		return
	}
	vs, ve, quoted := valueSpan(s, v)
	if ve <= vs {
		return
	}
	val := s[vs:ve]
	k := nameKinds[nk]
	if nk == nameGCPPrivateKey && strings.HasPrefix(val, "-----BEGIN") {
		k = kGCPServiceAccount
	}
	if !plausibleValue(s, vs, ve, nk, name, quoted, literal) {
		return
	}
	sc.add(vs, ve, k)
}

// plausibleValue holds the value tests that keep source code, schemas and
// UI strings clean.
func plausibleValue(s string, vs, ve int, nk nameKind, name string, quoted, literal bool) bool {
	val := s[vs:ve]
	minLen := 8
	if nk == namePassword {
		minLen = 3
		if quoted {
			minLen = 1
		}
	}
	switch {
	case len(val) < minLen, placeholder(val), at(s, ve) == '(' && !quoted:
		return false // too short to be a secret, a template, or a call
	case !quoted && !literal && identifierLike(val):
		return false // an expression in source code, not a literal
	case !quoted && (val[0] == '/' || val[0] == '~'):
		return false // a path (a key file), not the secret itself
	case strings.ContainsAny(val, " \t") && !strings.HasPrefix(val, "-----BEGIN"):
		return false // prose: "// indirect", "Enter your password"
	case len(val) >= len(name) && strings.EqualFold(val[:len(name)], name):
		return false // {"password": "Password"}, a label or a placeholder
	}
	return true
}

// nameKinds maps a name's class to the kind its value is redacted as.
var nameKinds = [...]kindID{namePassword: kPassword, nameSecret: kSecret, nameAWS: kAWSSecretKey,
	nameAzure: kAzureStorageKey, nameGCPPrivateKey: kSecret, nameAuthorization: kSecret}

// valueSpan returns a quoted value's contents or an unquoted value's run.
func valueSpan(s string, v int) (start, end int, quoted bool) {
	q := at(s, v)
	esc := q == '\\' && at(s, v+1) == '"'
	if esc {
		q = '"'
		v++
	}
	if q == '"' || q == '\'' || q == '`' {
		for j := v + 1; j < len(s) && j-v <= 8192; j++ { // a GCP key file's PEM is ~1.7-3.3 KB
			switch c := s[j]; {
			case c == '\n':
				return 0, 0, true
			case esc && c == '\\' && at(s, j+1) == '"':
				return v + 1, j, true
			case !esc && c == '\\':
				j++
			case !esc && c == q:
				return v + 1, j, true
			}
		}
		return 0, 0, true
	}
	e := v
	for e < len(s) && e-v < 256 && !valueStop[s[e]] {
		e++
	}
	for e > v && e < len(s) && !utf8.RuneStart(s[e]) {
		e-- // the cap cut a character: a marker must not leave half of it
	}
	return v, e, false
}

var valueStop = func() (t [256]bool) {
	for _, c := range " \t\r\n\"'`,;&<>(){}[]\\" {
		t[c] = true
	}
	t[0] = true
	return t
}()

// identifierLike reports a word or a dotted or colon-separated path: in
// code a variable, in a format description a field name.
func identifierLike(v string) bool {
	for i := 0; i < len(v); i++ {
		if !is(v[i], cAlpha|cUnder|cDot) && v[i] != ':' {
			return false
		}
	}
	return true
}

// placeholder reports values that stand for a secret rather than being
// one: templates, environment references, masks, and our own markers.
func placeholder(v string) bool {
	for _, p := range placeholderPrefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	if strings.Trim(v, "*xX.#-") == "" {
		return true
	}
	for _, w := range placeholderWords {
		if strings.EqualFold(v, w) {
			return true
		}
	}
	return false
}

var (
	placeholderPrefixes = []string{"${", "{{", "$(", "<", "%", markerPrefix, "os.", "env.", "process.env"}
	placeholderWords    = []string{"null", "none", "nil", "true", "false", "undefined", "required", "optional", "redacted", "hidden"}
)

// authorization handles "Authorization: <scheme> <credentials>"; it
// returns false when the value has no scheme, to be judged as any value.
func (sc *scanner) authorization(v int) bool {
	s := sc.s
	if q := at(s, v); q == '"' || q == '\'' {
		v++
	}
	w := run(s, v, cAlpha, 16)
	b := run(s, w, cSpace, 4)
	if b == w || w == v {
		return false
	}
	k := kSecret
	switch {
	case strings.EqualFold(s[v:w], "bearer"):
		k = kBearerToken
	case strings.EqualFold(s[v:w], "basic"):
		k = kBasicAuth
	}
	e := run(s, b, cB64URL|cDot|cPlus|cSlash|cEq, 4096)
	if e-b >= 8 && !placeholder(s[b:e]) && at(s, e) != '(' {
		sc.add(b, e, k)
	}
	return true
}

// urlStop ends a URL's authority.
var urlStop = func() (t [256]bool) {
	for _, c := range " \t\r\n/?#\"'`<>\\" {
		t[c] = true
	}
	return t
}()

// scanURLs redacts the password of scheme://user:password@host, the form
// of database DSNs, broker URLs and git remotes with embedded tokens.
func (sc *scanner) scanURLs() {
	s := sc.s
	for i := indexFrom(s, "://", 0); i >= 0; i = indexFrom(s, "://", i+3) {
		ss := runBack(s, i, cAlnum|cPlus|cDot|cDash, 32)
		if i-ss < 2 || !is(s[ss], cAlpha) {
			continue
		}
		a := i + 3
		last := -1
		e := a
		for ; e < len(s) && e-a < 512 && !urlStop[s[e]]; e++ {
			if s[e] == '@' {
				last = e
			}
		}
		if last < 0 {
			continue
		}
		c := strings.IndexByte(s[a:last], ':')
		if c < 0 {
			continue
		}
		if p := a + c + 1; p < last && !placeholder(s[p:last]) {
			sc.add(p, last, kURLPassword)
		}
	}
}
