package sanitize

import (
	"net/netip"
	"strings"
)

// Personal data. Numbers are the hard part: logs are full of digits
// (timestamps, ids, sizes, versions), so every number kind is a strict
// shape plus, where one exists, a checksum: payment cards need a known
// issuer prefix and the Luhn check, IBANs their country's length and the
// ISO 7064 mod-97 check, SSNs the ranges the SSA never assigns excluded,
// phone numbers an international "+" form or the North American layout.

func (sc *scanner) scanPII() {
	if sc.d.on[kEmail] {
		sc.scanEmails()
	}
	if sc.d.anyOn(kPhone, kCard, kIBAN, kSSN, kIPAddress) {
		sc.scanNumbers()
	}
	if sc.d.on[kIPAddress] {
		sc.scanIPv6()
	}
}

// scanEmails anchors on '@'. URL user info (scheme://user:pass@host) and
// SSH remotes (git@host) are not addresses of people.
func (sc *scanner) scanEmails() {
	s := sc.s
	for i := indexByteFrom(s, '@', 0); i >= 0; i = indexByteFrom(s, '@', i+1) {
		ls := runBack(s, i, cAlnum|cDot|cUnder|cPlus|cDash, 64)
		for ls < i && (s[ls] == '.' || s[ls] == '-') {
			ls++
		}
		if ls == i || s[i-1] == '.' || s[ls:i] == "git" || inAuthority(s, ls) {
			continue
		}
		de := run(s, i+1, cAlnum|cDash|cDot, 253)
		for de > i+1 && (s[de-1] == '.' || s[de-1] == '-') {
			de--
		}
		if validDomain(s[i+1 : de]) {
			sc.add(ls, de, kEmail)
			i = de - 1
		}
	}
}

// inAuthority reports that the text before i, back to the last separator,
// opens a URL ("//"): the '@' ends user info.
func inAuthority(s string, i int) bool {
	j := i
	for j > 0 && i-j < 256 && !authorityStop[s[j-1]] {
		j--
	}
	return at(s, j-1) == '/' && at(s, j-2) == '/'
}

var authorityStop = func() (t [256]bool) {
	for _, c := range " \t\r\n/\"'`<>@" {
		t[c] = true
	}
	return t
}()

// validDomain wants dot-separated labels ending in an alphabetic TLD, which
// keeps "pkg@v1.2.3" and "image@sha256" out.
func validDomain(d string) bool {
	dot := strings.LastIndexByte(d, '.')
	if dot <= 0 {
		return false
	}
	tld := d[dot+1:]
	if len(tld) < 2 || len(tld) > 24 || run(tld, 0, cAlpha, len(tld)) != len(tld) {
		return false
	}
	if run(tld, 0, cLower, len(tld)) != len(tld) && run(tld, 0, cUpper, len(tld)) != len(tld) {
		return false // "m.Path@m.Version" is code
	}
	for rest := d; rest != ""; {
		label, tail, _ := strings.Cut(rest, ".")
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		rest = tail
	}
	return !strings.HasSuffix(d, ".")
}

// scanNumbers walks the digits. A digit inside a word (hex digests, UUIDs,
// base64) skips the word at once; only IBANs start with letters.
func (sc *scanner) scanNumbers() {
	s := sc.s
	n := len(s)
	for i := 0; i < n; {
		for i+8 <= n && hasDigit(load64(s, i)) == 0 {
			i += 8
		}
		if i >= n {
			break
		}
		if ctab[s[i]]&cDigit == 0 {
			i++
			continue
		}
		if p := at(s, i-1); is(p, cWord) {
			if sc.d.on[kIBAN] && i >= 2 && is(s[i-1], cUpper) && is(s[i-2], cUpper) && !is(at(s, i-3), cWord) {
				if end := iban(s, i-2); end > 0 {
					sc.add(i-2, end, kIBAN)
					i = end
					continue
				}
			}
			i = run(s, i, cWord, n)
			continue
		}
		i = sc.number(i)
	}
}

// groups is a number split at its separators: "4111 1111 1111 1111".
type groups struct {
	end  [8]int // end offset of each group
	len  [8]int // digits in each group
	n    int
	sep  byte
	last int // end of the last group
}

// gather reads up to 8 digit groups from i, joined by one consistent
// separator out of " -.".
func gather(s string, i int) groups {
	var g groups
	for g.n < len(g.end) {
		e := run(s, i, cDigit, len(s))
		g.len[g.n], g.end[g.n] = e-i, e
		g.n++
		g.last = e
		c := at(s, e)
		if e-i > 19 || (c != ' ' && c != '-' && c != '.') || !is(at(s, e+1), cDigit) || (g.sep != 0 && c != g.sep) {
			break
		}
		g.sep = c
		i = e + 1
	}
	return g
}

// endsNumber reports that a number ending at e stands alone: no letter or
// digit follows, nor a separator that continues it ("1.2.3.4.5").
func endsNumber(s string, e int) bool {
	c := at(s, e)
	if is(c, cWord) {
		return false
	}
	return !((c == '.' || c == '-') && is(at(s, e+1), cDigit))
}

// number analyses the number starting at digit i and returns where the
// scan goes on.
func (sc *scanner) number(i int) int {
	s := sc.s
	p := at(s, i-1)
	if p == '+' && sc.d.on[kPhone] && !is(at(s, i-2), cAlnum) {
		if e := phoneIntl(s, i); e > 0 {
			sc.add(i-1, e, kPhone)
			return e
		}
	}
	if p == '(' && sc.d.on[kPhone] {
		if e := phoneParen(s, i); e > 0 {
			sc.add(i-1, e, kPhone)
			return e
		}
	}
	g := gather(s, i)
	if g.len[0] > 19 {
		return g.end[0]
	}
	if p != '.' && p != '-' && p != '/' {
		if e := sc.dashed(s, i, &g); e > 0 {
			return e
		}
	}
	minus := p == '-' && !is(at(s, i-2), cAlpha) // "-4181792142133755926", not "card-4111..."
	if sc.d.on[kCard] && p != '.' && !minus && (g.sep == 0 || g.sep == ' ' || g.sep == '-') {
		if e := cardEnd(s, i, &g); e > 0 {
			sc.add(i, e, kCard)
			return e
		}
	}
	return g.end[0]
}

// dashed finds SSNs (ddd-dd-dddd), North American phone numbers
// ([1-]NXX-NXX-XXXX, dots too) and IPv4 addresses.
func (sc *scanner) dashed(s string, i int, g *groups) int {
	l := g.len
	switch {
	case g.n >= 3 && g.sep == '-' && l[0] == 3 && l[1] == 2 && l[2] == 4 && endsNumber(s, g.end[2]):
		if sc.d.on[kSSN] && validSSN(s[i:g.end[2]]) {
			sc.add(i, g.end[2], kSSN)
			return g.end[2]
		}
	case g.n >= 3 && (g.sep == '-' || g.sep == '.') && l[0] == 3 && l[1] == 3 && l[2] == 4 && endsNumber(s, g.end[2]):
		if sc.d.on[kPhone] && s[i] >= '2' && s[g.end[0]+1] >= '2' {
			sc.add(i, g.end[2], kPhone)
			return g.end[2]
		}
	case g.n >= 4 && g.sep == '-' && l[0] == 1 && s[i] == '1' && l[1] == 3 && l[2] == 3 && l[3] == 4 && endsNumber(s, g.end[3]):
		if sc.d.on[kPhone] && s[i+2] >= '2' && s[g.end[1]+1] >= '2' {
			sc.add(i, g.end[3], kPhone)
			return g.end[3]
		}
	case g.n >= 4 && g.sep == '.' && l[0] <= 3 && l[1] <= 3 && l[2] <= 3 && l[3] <= 3 && endsNumber(s, g.end[3]):
		if sc.d.on[kIPAddress] && validIPv4(s[i:g.end[3]]) {
			sc.add(i, g.end[3], kIPAddress)
			return g.end[3]
		}
	}
	return 0
}

// cardEnd returns the end of the longest prefix of whole groups that is a
// valid card number (13-19 digits), or 0.
func cardEnd(s string, i int, g *groups) int {
	var digits [19]byte
	n, best := 0, 0
	pos := i
	grouped := true // every group 3 to 6 digits, as cards are printed
	for k := 0; k < g.n; k++ {
		if n+g.len[k] > len(digits) {
			break
		}
		for j := pos; j < g.end[k]; j++ {
			digits[n] = s[j]
			n++
		}
		pos = g.end[k] + 1
		grouped = grouped && g.len[k] >= 3 && g.len[k] <= 6
		// Contiguous, only the common 13-16 digits: 17-19 digit runs are
		// mostly 64-bit integers, and one in ten passes Luhn.
		plain := k == 0 && n <= 16
		if n >= 13 && (plain || k > 0 && grouped) && validCard(digits[:n]) && !is(at(s, g.end[k]), cWord) {
			best = g.end[k]
		}
	}
	return best
}

// phoneIntl matches "+<country code> <groups>" from the digit after '+':
// 9 to 15 digits (E.164), groups joined by single spaces, dashes, dots or
// parentheses ("+44 (0)20 7946 0958").
func phoneIntl(s string, i int) int {
	if s[i] == '0' {
		return 0
	}
	digits, end, j := 0, 0, i
loop:
	for j < len(s) && digits <= 15 {
		c := s[j]
		switch {
		case is(c, cDigit):
			digits++
			j++
			end = j
		case (c == ' ' || c == '-') && (is(at(s, j+1), cDigit) || at(s, j+1) == '(') && end == j:
			j++
		case c == '(' && is(at(s, j+1), cDigit):
			j++
		case c == ')' && end == j && (at(s, j+1) == ' ' || is(at(s, j+1), cDigit)):
			j++
		default:
			break loop
		}
	}
	if digits < 9 || digits > 15 || !endsNumber(s, end) {
		return 0
	}
	return end
}

// phoneParen matches "(NXX) NXX-XXXX" from the digit after '('.
func phoneParen(s string, i int) int {
	if run(s, i, cDigit, 4) != i+3 || at(s, i+3) != ')' || s[i] < '2' || is(at(s, i-2), cAlnum) {
		return 0
	}
	j := i + 4
	if at(s, j) == ' ' {
		j++
	}
	if run(s, j, cDigit, 4) != j+3 || at(s, j) < '2' {
		return 0
	}
	j += 3
	if c := at(s, j); c == '-' || c == '.' || c == ' ' {
		j++
	}
	if run(s, j, cDigit, 5) != j+4 || !endsNumber(s, j+4) {
		return 0
	}
	return j + 4
}

// scanIPv6 (opt-in with ip_address) parses tokens of hex digits and
// colons holding at least two colons.
func (sc *scanner) scanIPv6() {
	s := sc.s
	for i := indexByteFrom(s, ':', 0); i >= 0; i = indexByteFrom(s, ':', i+1) {
		st := i
		for st > 0 && (is(s[st-1], cHex) || s[st-1] == ':') {
			st--
		}
		e := i
		for e < len(s) && (is(s[e], cHex|cDot) || s[e] == ':') {
			e++
		}
		for e > i && s[e-1] == '.' {
			e--
		}
		tok := s[st:e]
		i = e
		if strings.Count(tok, ":") < 2 || is(at(s, st-1), cWord) || is(at(s, e), cWord) {
			continue
		}
		if a, err := netip.ParseAddr(tok); err == nil && a.Is6() && !a.IsUnspecified() {
			sc.add(st, e, kIPAddress)
		}
	}
}
