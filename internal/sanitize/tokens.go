package sanitize

import "strings"

// Token detectors. Each format follows the matching gitleaks v8 rule
// (named in the comments) so the patterns come from a maintained rule set,
// but is matched by hand: a literal anchor found with strings.Index, then a
// bounded scan of byte classes. Clean text therefore costs a few SIMD
// searches and no regexp at all.

func (sc *scanner) scanTokens() {
	d := sc.d
	if d.anyOn(kAWSAccessKeyID, kGCPAPIKey) {
		sc.scanA()
	}
	if d.on[kGitHubToken] {
		sc.scanGitHub()
	}
	if d.on[kGitLabToken] {
		sc.scanGitLab()
	}
	if d.on[kSlackToken] {
		sc.scanSlack()
	}
	if d.on[kSlackWebhook] {
		sc.scanSlackWebhook()
	}
	if d.on[kStripeKey] {
		sc.scanStripe()
	}
	if d.anyOn(kOpenAIKey, kAnthropicKey) {
		sc.scanSK()
	}
	if d.on[kJWT] {
		sc.scanJWT()
	}
	if d.on[kBearerToken] {
		sc.scanBearer()
	}
}

// scanA finds AWS access key ids (gitleaks aws-access-token:
// (A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}) and GCP API keys
// (gcp-api-key: AIza[\w-]{35}).
func (sc *scanner) scanA() {
	s := sc.s
	for i := indexByteFrom(s, 'A', 0); i >= 0 && i+20 <= len(s); i = indexByteFrom(s, 'A', i+1) {
		if is(at(s, i-1), cAlnum) {
			continue
		}
		if s[i+1] == 'I' && s[i+2] == 'z' && s[i+3] == 'a' {
			if end := i + 39; run(s, i+4, cB64URL, 35) == end && !is(at(s, end), cB64URL) {
				sc.add(i, end, kGCPAPIKey)
			}
			continue
		}
		if end := i + 20; awsPrefix(s[i:i+4]) && base32Upper(s[i+4:end]) && !is(at(s, end), cAlnum) {
			sc.add(i, end, kAWSAccessKeyID)
		}
	}
}

func awsPrefix(p string) bool {
	switch p {
	case "AKIA", "ASIA", "ABIA", "ACCA":
		return true
	}
	return p[1] == '3' && p[2] == 'T' && is(p[3], cUpper|cDigit)
}

func base32Upper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

// scanGitHub: gitleaks github-pat, github-oauth, github-app-token,
// github-refresh-token (gh[pousr]_[0-9a-zA-Z]{36}) and
// github-fine-grained-pat (github_pat_\w{82}). GitHub documents that tokens
// may grow, so longer bodies (up to 255 bytes) count too.
func (sc *scanner) scanGitHub() {
	s := sc.s
	for i := indexFrom(s, "gh", 0); i >= 0; i = indexFrom(s, "gh", i+2) {
		if is(at(s, i-1), cWord) {
			continue
		}
		end := -1
		if strings.HasPrefix(s[i:], "github_pat_") {
			if e := run(s, i+11, cWord, 244); e-(i+11) >= 82 {
				end = e
			}
		} else if c := at(s, i+2); c != 0 && strings.IndexByte("pousr", c) >= 0 && at(s, i+3) == '_' {
			if e := run(s, i+4, cAlnum, 251); e-(i+4) >= 36 && !is(at(s, e), cWord) {
				end = e
			}
		}
		if end > 0 {
			sc.add(i, end, kGitHubToken)
			i = end - 2
		}
	}
}

// gitlabPrefixes are GitLab's token prefixes (gitleaks gitlab-* rules).
var gitlabPrefixes = []string{"glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "glsoat-", "glagent-", "gloas-"}

func (sc *scanner) scanGitLab() {
	s := sc.s
	for i := indexFrom(s, "gl", 0); i >= 0; i = indexFrom(s, "gl", i+2) {
		if is(at(s, i-1), cWord) {
			continue
		}
		for _, p := range gitlabPrefixes {
			if !strings.HasPrefix(s[i:], p) {
				continue
			}
			b := i + len(p)
			e := run(s, b, cB64URL|cDot, 300)
			for e > b && (s[e-1] == '.' || s[e-1] == '-') {
				e--
			}
			if e-b >= 20 {
				sc.add(i, e, kGitLabToken)
				i = e - 2
			}
			break
		}
	}
}

// scanSlack: gitleaks slack-bot-token, slack-user-token, slack-legacy-*,
// slack-config-* (xox[abeoprs]-...) and slack-app-token (xapp-...).
func (sc *scanner) scanSlack() {
	s := sc.s
	for i := indexFrom(s, "x", 0); i >= 0; i = indexFrom(s, "x", i+1) {
		if is(at(s, i-1), cAlnum) {
			continue
		}
		var b int
		switch {
		case strings.HasPrefix(s[i:], "xox") && strings.IndexByte("abeoprs", at(s, i+3)) >= 0 && at(s, i+4) == '-' && at(s, i+3) != 0:
			b = i + 5
		case strings.HasPrefix(s[i:], "xapp-"):
			b = i + 5
		default:
			continue
		}
		e := run(s, b, cAlnum|cDash, 250)
		for e > b && s[e-1] == '-' {
			e--
		}
		if e-b >= 10 && !is(at(s, e), cWord) {
			sc.add(i, e, kSlackToken)
			i = e - 1
		}
	}
}

// scanSlackWebhook: gitleaks slack-webhook-url. The whole URL is the
// credential, so the scheme goes too.
func (sc *scanner) scanSlackWebhook() {
	s := sc.s
	const host = "hooks.slack.com/"
	for i := indexFrom(s, host, 0); i >= 0; i = indexFrom(s, host, i+1) {
		b := i + len(host)
		var p string
		for _, p = range []string{"services/", "workflows/", "triggers/"} {
			if strings.HasPrefix(s[b:], p) {
				break
			}
			p = ""
		}
		if p == "" {
			continue
		}
		e := run(s, b+len(p), cAlnum|cSlash|cPlus|cUnder|cDash, 512)
		if e-(b+len(p)) < 20 {
			continue
		}
		start := i
		for _, scheme := range []string{"https://", "http://"} {
			if strings.HasSuffix(s[:i], scheme) {
				start = i - len(scheme)
			}
		}
		sc.add(start, e, kSlackWebhook)
		i = e - 1
	}
}

// scanStripe: gitleaks stripe-access-token ((sk|rk)_(test|live|prod)_...).
// Publishable keys (pk_) are public by design and stay.
func (sc *scanner) scanStripe() {
	s := sc.s
	for i := indexFrom(s, "k_", 1); i >= 0; i = indexFrom(s, "k_", i+2) {
		st := i - 1
		if c := s[st]; (c != 's' && c != 'r') || is(at(s, st-1), cWord) {
			continue
		}
		r := s[i+2:]
		if !strings.HasPrefix(r, "live_") && !strings.HasPrefix(r, "test_") && !strings.HasPrefix(r, "prod_") {
			continue
		}
		b := i + 7
		if e := run(s, b, cAlnum, 255); e-b >= 10 && !is(at(s, e), cWord) {
			sc.add(st, e, kStripeKey)
			i = e - 2
		}
	}
}

// scanSK: gitleaks anthropic-api-key / anthropic-admin-api-key
// (sk-ant-...) and openai-api-key (sk-proj-, sk-svcacct-, sk-admin-, the
// legacy T3BlbkFJ marker, or 32+ alphanumerics after sk-).
func (sc *scanner) scanSK() {
	s := sc.s
	for i := indexRare(s, "sk-", 1, 0); i >= 0; i = indexRare(s, "sk-", 1, i+3) {
		if is(at(s, i-1), cB64URL) {
			continue
		}
		e := run(s, i+3, cB64URL, 250)
		body := s[i+3 : e]
		k := kindID(0)
		switch {
		case strings.HasPrefix(body, "ant-"):
			if len(body) >= 4+32 {
				k = kAnthropicKey
			}
		case strings.HasPrefix(body, "proj-") || strings.HasPrefix(body, "svcacct-") || strings.HasPrefix(body, "admin-"):
			if len(body) >= 28 {
				k = kOpenAIKey
			}
		case strings.Contains(body, "T3BlbkFJ") || len(body) >= 32 && run(body, 0, cAlnum, len(body)) == len(body):
			k = kOpenAIKey
		}
		if k != 0 {
			sc.add(i, e, k)
			i = e - 3
		}
	}
}

// scanJWT: gitleaks jwt (ey...\.ey...\.sig). Five-part JWEs count too.
func (sc *scanner) scanJWT() {
	s := sc.s
	const maxPart = 8192
	for i := indexRare(s, "eyJ", 2, 0); i >= 0; i = indexRare(s, "eyJ", 2, i+1) {
		if is(at(s, i-1), cB64URL) {
			continue
		}
		h := run(s, i, cB64URL, maxPart)
		if h-i < 12 || at(s, h) != '.' || !strings.HasPrefix(s[h+1:], "ey") {
			i = h - 1
			continue
		}
		p := run(s, h+1, cB64URL, maxPart)
		if p-(h+1) < 12 || at(s, p) != '.' {
			i = p - 1
			continue
		}
		e := run(s, p+1, cB64URL, maxPart)
		for parts := 3; parts < 5 && at(s, e) == '.' && is(at(s, e+1), cB64URL); parts++ {
			e = run(s, e+1, cB64URL, maxPart)
		}
		for n := 0; n < 2 && at(s, e) == '='; n++ {
			e++
		}
		sc.add(i, e, kJWT)
		i = e - 1
	}
}

// scanBearer finds "Bearer <token>" wherever it appears (headers, curl
// command lines, logs); gitleaks has only provider-specific bearer rules.
// The token must hold a digit: prose such as "bearer authentication"
// stays.
func (sc *scanner) scanBearer() {
	s := sc.s
	for i := indexFrom(s, "earer", 1); i >= 0; i = indexFrom(s, "earer", i+5) {
		if c := s[i-1]; (c != 'b' && c != 'B') || is(at(s, i-2), cAlnum) {
			continue
		}
		b := run(s, i+5, cSpace, 4)
		if b == i+5 {
			continue
		}
		e := run(s, b, cB64URL|cDot|cPlus|cSlash, 4096)
		for n := 0; n < 2 && at(s, e) == '='; n++ {
			e++
		}
		if e-b >= 16 && strings.ContainsAny(s[b:e], "0123456789") {
			sc.add(b, e, kBearerToken)
			i = e - 5
		}
	}
}

// pemBodyTab marks what a PEM private key block may hold between its
// header and footer: base64, whitespace, escaped newlines (a key inside a
// JSON string printed raw) and the Proc-Type/DEK-Info headers of
// encrypted keys.
var pemBodyTab = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = is(byte(c), cB64|cSpace|cDash)
	}
	for _, c := range "\n\r\\:," {
		t[c] = true
	}
	return t
}()

// scanPEM finds private key blocks (gitleaks private-key): the header, the
// body and the footer. A block whose footer is missing (a truncated key)
// is redacted as far as its body goes. open says s continues a block that
// an earlier segment began; the result says the block is still open at
// the end of s (both only matter when streaming).
func (sc *scanner) scanPEM(open bool) bool {
	s := sc.s
	from := 0
	if open {
		end, closed := pemBody(s, 0)
		if end > 0 {
			sc.out = append(sc.out, finding{start: 0, end: end, kind: kPrivateKey, cont: true})
		}
		if !closed && end == len(s) {
			return true
		}
		from = end
	}
	for {
		i := indexFrom(s, "-----BEGIN ", from)
		if i < 0 {
			return false
		}
		h, ok := pemHeader(s, i)
		if !ok {
			from = i + 11
			continue
		}
		end, closed := pemBody(s, h)
		sc.add(i, end, kPrivateKey)
		if !closed && end == len(s) {
			return sc.d.on[kPrivateKey]
		}
		from = end
	}
}

// pemHeader parses "-----BEGIN <label>PRIVATE KEY[ BLOCK]-----" at i.
func pemHeader(s string, i int) (int, bool) {
	j := i + len("-----BEGIN ")
	k := j
	for k < len(s) && k-j < 100 && (is(s[k], cUpper|cDigit) || s[k] == ' ') {
		k++
	}
	label := s[j:k]
	if !strings.HasSuffix(label, "PRIVATE KEY") && !strings.HasSuffix(label, "PRIVATE KEY BLOCK") {
		return 0, false
	}
	if !strings.HasPrefix(s[k:], "-----") {
		return 0, false
	}
	return k + 5, true
}

// pemBody consumes a block body from i up to and including its footer.
func pemBody(s string, i int) (end int, closed bool) {
	for i < len(s) {
		c := s[i]
		if c == '-' && strings.HasPrefix(s[i:], "-----END ") {
			k := i + len("-----END ")
			for k < len(s) && k-i < 110 && (is(s[k], cUpper|cDigit) || s[k] == ' ') {
				k++
			}
			if strings.HasPrefix(s[k:], "-----") {
				return k + 5, true
			}
		}
		if !pemBodyTab[c] {
			return i, false
		}
		i++
	}
	return i, false
}
