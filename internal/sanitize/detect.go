package sanitize

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// class tells secrets from personal data: policies treat them apart (an
// operator may keep e-mail addresses in a CRM tool's output and still
// redact its API keys).
type class uint8

const (
	classSecret class = iota
	classPII
)

func (c class) String() string {
	if c == classPII {
		return "pii"
	}
	return "secret"
}

// kindID indexes a detector kind: built-ins first, in priority order (when
// two findings start at the same byte the lower id names the merged
// redaction), then the configured custom patterns.
type kindID uint16

// kindInfo describes one kind of finding.
type kindInfo struct {
	name  string
	class class
	// optIn kinds are off unless a policy turns them on (IP addresses
	// match version strings; only operators who need them pay for that).
	optIn bool
}

// The built-in kinds, most specific first.
const (
	kAWSAccessKeyID kindID = iota
	kAWSSecretKey
	kGCPAPIKey
	kGCPServiceAccount
	kAzureStorageKey
	kGitHubToken
	kGitLabToken
	kSlackToken
	kSlackWebhook
	kStripeKey
	kOpenAIKey
	kAnthropicKey
	kPrivateKey
	kJWT
	kBearerToken
	kBasicAuth
	kURLPassword
	kPassword
	kSecret
	kEmail
	kPhone
	kCard
	kIBAN
	kSSN
	kIPAddress
	numBuiltin
)

// builtinKinds is a constant table, indexed by kindID.
var builtinKinds = [numBuiltin]kindInfo{
	kAWSAccessKeyID:    {name: "aws_access_key_id"},
	kAWSSecretKey:      {name: "aws_secret_access_key"},
	kGCPAPIKey:         {name: "gcp_api_key"},
	kGCPServiceAccount: {name: "gcp_service_account_key"},
	kAzureStorageKey:   {name: "azure_storage_key"},
	kGitHubToken:       {name: "github_token"},
	kGitLabToken:       {name: "gitlab_token"},
	kSlackToken:        {name: "slack_token"},
	kSlackWebhook:      {name: "slack_webhook"},
	kStripeKey:         {name: "stripe_key"},
	kOpenAIKey:         {name: "openai_api_key"},
	kAnthropicKey:      {name: "anthropic_api_key"},
	kPrivateKey:        {name: "private_key"},
	kJWT:               {name: "jwt"},
	kBearerToken:       {name: "bearer_token"},
	kBasicAuth:         {name: "basic_auth"},
	kURLPassword:       {name: "url_password"},
	kPassword:          {name: "password"},
	kSecret:            {name: "secret"},
	kEmail:             {name: "email", class: classPII},
	kPhone:             {name: "phone_number", class: classPII},
	kCard:              {name: "payment_card", class: classPII},
	kIBAN:              {name: "iban", class: classPII},
	kSSN:               {name: "us_ssn", class: classPII},
	kIPAddress:         {name: "ip_address", class: classPII, optIn: true},
}

// BuiltinKinds lists the names of the built-in detector kinds, for
// documentation and config validation.
func BuiltinKinds() []string {
	names := make([]string, numBuiltin)
	for i, k := range builtinKinds {
		names[i] = k.name
	}
	return names
}

// customRule is an operator's pattern.
type customRule struct {
	kind   kindID
	re     *regexp.Regexp
	group  int
	prefix string // a literal every match starts with; "" when none
}

// finding is one span to redact. cont marks the continuation of a private
// key block that a streaming redactor already replaced in an earlier
// segment: it is removed without a second marker.
type finding struct {
	start, end int
	kind       kindID
	cont       bool
}

// detector is one policy's compiled rule set; immutable and safe for
// concurrent use. Scanners whose kinds are all off are not run at all.
type detector struct {
	kinds   []kindInfo
	on      []bool
	allow   map[string]struct{}
	customs []customRule
}

func (d *detector) enabled(k kindID) bool { return d.on[k] }

func (d *detector) anyOn(ks ...kindID) bool {
	for _, k := range ks {
		if d.on[k] {
			return true
		}
	}
	return false
}

// none reports whether the detector finds nothing at all.
func (d *detector) none() bool {
	return !slices.Contains(d.on, true)
}

// scanner collects findings over one text.
type scanner struct {
	d   *detector
	s   string
	out []finding
}

func (sc *scanner) add(start, end int, k kindID) {
	if end > start && sc.d.on[k] {
		sc.out = append(sc.out, finding{start: start, end: end, kind: k})
	}
}

var findingPool = sync.Pool{New: func() any { s := make([]finding, 0, 16); return &s }}

// find returns the merged, non-overlapping findings in s, sorted. pemOpen
// says s continues a private key block (streaming). The slice comes from a
// pool: release it with putFindings.
//
// find judges s line by line, as streams and blocks of lines must be
// judged (what a later line holds cannot change an earlier one); findText
// judges a whole text, with the views that span lines (joins.go,
// lists.go).
func (d *detector) find(s string, pemOpen bool) (fs *[]finding, pemOpenAtEnd bool) {
	return d.findIn(s, pemOpen, false)
}

// findText is find for a whole text.
func (d *detector) findText(s string) *[]finding {
	fs, _ := d.findIn(s, false, true)
	return fs
}

func (d *detector) findIn(s string, pemOpen, across bool) (fs *[]finding, pemOpenAtEnd bool) {
	fs = findingPool.Get().(*[]finding)
	var raw []finding
	raw, pemOpenAtEnd = d.scanAll(s, pemOpen, (*fs)[:0], across)
	*fs = d.merge(s, raw)
	return fs, pemOpenAtEnd
}

// scanAll appends every matcher's findings in s, views included, to out,
// unmerged: what each matcher found, each with its own kind and span.
// across adds the views that span lines.
func (d *detector) scanAll(s string, pemOpen bool, out []finding, across bool) (_ []finding, pemOpenAtEnd bool) {
	sc := scanner{d: d, s: s, out: out}
	if pemOpen || d.on[kPrivateKey] || d.on[kGCPServiceAccount] {
		pemOpenAtEnd = sc.scanPEM(pemOpen)
	}
	sc.scanTokens()
	sc.scanAssignments()
	sc.scanPII()
	for i := range d.customs {
		sc.scanCustom(&d.customs[i])
	}
	sc.scanViews()
	sc.scanLists(across)
	if across {
		sc.scanJoins()
	}
	sc.scanQuoted(across)
	return sc.out, pemOpenAtEnd
}

func putFindings(fs *[]finding) {
	if cap(*fs) <= 4096 { // a huge one-off slice is not worth keeping
		*fs = (*fs)[:0]
		findingPool.Put(fs)
	}
}

// merge drops allow-listed and already-redacted findings, then unites
// overlapping ones: redacting the union never leaks a part of either. The
// union is named by the finding that starts first (ties: a streaming
// continuation, then the most specific kind), so a text redacts the same
// whether it arrives whole or in pieces.
func (d *detector) merge(s string, out []finding) []finding {
	kept := out[:0]
	for _, f := range out {
		v := s[f.start:f.end]
		if strings.HasPrefix(v, markerPrefix) {
			continue
		}
		if _, ok := d.allow[v]; ok && !f.cont {
			continue
		}
		kept = append(kept, f)
	}
	slices.SortFunc(kept, func(a, b finding) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		if a.cont != b.cont {
			if a.cont {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.kind, b.kind)
	})
	merged := kept[:0]
	for _, f := range kept {
		if n := len(merged); n > 0 && f.start < merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, f.end)
			continue
		}
		merged = append(merged, f)
	}
	return merged
}

const markerPrefix = "[REDACTED:"

// kindNamed is the kind of that name.
func (d *detector) kindNamed(name string) (kindID, bool) {
	for i := range d.kinds {
		if d.kinds[i].name == name {
			return kindID(i), true
		}
	}
	return 0, false
}

// apply writes s with the findings replaced by their markers to dst.
func (d *detector) apply(dst []byte, s string, fs []finding, counts *kindCounts) []byte {
	prev := 0
	for _, f := range fs {
		dst = append(dst, s[prev:f.start]...)
		if !f.cont {
			dst = append(dst, markerPrefix...)
			dst = append(dst, d.kinds[f.kind].name...)
			dst = append(dst, ']')
			counts.add(f.kind)
		}
		prev = f.end
	}
	return append(dst, s[prev:]...)
}

// redactString is redactInto for a whole string; it returns s itself (no
// allocation) when nothing is found.
func (d *detector) redactString(s string, counts *kindCounts) string {
	if d.none() || s == "" {
		return s
	}
	out, found := d.redactInto(nil, s, counts)
	if !found {
		return s
	}
	return string(out)
}

// maxRounds bounds redaction to a fixpoint. Replacing a finding changes
// the boundary its neighbour sees ("x.com+1415..." hides a phone number
// behind an e-mail address until the address is a marker), and sanitizing
// twice must change nothing more than sanitizing once.
const maxRounds = 4

// redactInto appends s with its findings replaced to dst; found reports
// whether there were any.
func (d *detector) redactInto(dst []byte, s string, counts *kindCounts) (out []byte, found bool) {
	fs := d.findText(s)
	defer func() { putFindings(fs) }()
	if len(*fs) == 0 {
		return dst, false
	}
	start := len(dst)
	dst = d.apply(dst, s, *fs, counts)
	var tmp []byte
	for round := 1; round < maxRounds; round++ {
		putFindings(fs)
		fs = d.findText(unsafeString(dst[start:]))
		if len(*fs) == 0 {
			break
		}
		tmp = d.apply(tmp[:0], unsafeString(dst[start:]), *fs, counts)
		dst = append(dst[:start], tmp...)
	}
	return dst, true
}

// scanCustom runs an operator's regexp. A literal prefix, when the pattern
// has one, lets clean text skip the regexp entirely.
func (sc *scanner) scanCustom(r *customRule) {
	if !sc.d.on[r.kind] || (r.prefix != "" && !strings.Contains(sc.s, r.prefix)) {
		return
	}
	for _, m := range r.re.FindAllStringSubmatchIndex(sc.s, -1) {
		if g := 2 * r.group; g+1 < len(m) && m[g] >= 0 {
			sc.add(m[g], m[g+1], r.kind)
		}
	}
}

// kindCounts counts redactions by kind without a map on the hot path.
type kindCounts struct {
	n   []int
	sum int
}

func (c *kindCounts) add(k kindID) {
	if c == nil {
		return
	}
	if int(k) >= len(c.n) {
		c.n = append(c.n, make([]int, int(k)+1-len(c.n))...)
	}
	c.n[k]++
	c.sum++
}

// report converts counts to a Report's redaction fields.
func (c *kindCounts) report(kinds []kindInfo, r *Report) {
	if c == nil || c.sum == 0 {
		return
	}
	if r.ByKind == nil {
		r.ByKind = map[string]int{}
	}
	for k, n := range c.n {
		if n > 0 {
			r.ByKind[kinds[k].name] += n
		}
	}
	r.Redactions += c.sum
}
