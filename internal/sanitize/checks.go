package sanitize

// Checksums and number ranges that turn "looks like" into "is".

// validCard applies the issuer prefix ranges (IIN) and lengths of the card
// networks, then the Luhn check.
func validCard(d []byte) bool {
	if !cardIIN(d) {
		return false
	}
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

func cardIIN(d []byte) bool {
	n := len(d)
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p3 := p2*10 + int(d[2]-'0')
	p4 := p3*10 + int(d[3]-'0')
	switch {
	case d[0] == '4': // Visa
		return n == 13 || n == 16 || n == 19
	case 51 <= p2 && p2 <= 55, 2221 <= p4 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case p2 == 36 || p2 == 38 || p2 == 39 || 300 <= p3 && p3 <= 305: // Diners Club
		return 14 <= n && n <= 19
	case 3528 <= p4 && p4 <= 3589: // JCB
		return 16 <= n && n <= 19
	case p4 == 6011 || p2 == 65 || 644 <= p3 && p3 <= 649: // Discover
		return 16 <= n && n <= 19
	case p2 == 62: // UnionPay
		return 16 <= n && n <= 19
	case p2 == 50 || 56 <= p2 && p2 <= 69: // Maestro
		return 13 <= n && n <= 19
	}
	return false
}

// validSSN rejects what the SSA never issues: area 000, 666 or 900-999,
// group 00, serial 0000. s is "ddd-dd-dddd".
func validSSN(s string) bool {
	area, group, serial := s[0:3], s[4:6], s[7:11]
	return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000"
}

// validIPv4 checks four dot-separated octets of at most 255.
func validIPv4(s string) bool {
	octets, v, digits := 0, 0, 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if digits == 0 || v > 255 {
				return false
			}
			octets++
			v, digits = 0, 0
			continue
		}
		v = v*10 + int(s[i]-'0')
		digits++
	}
	return octets == 4
}

// ibanLength is each country's IBAN length (SWIFT IBAN registry).
var ibanLength = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
	"MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25,
	"QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27,
	"ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

// iban matches an IBAN at i, compact or printed in groups of four, and
// returns its end when the length and the mod-97 check hold, else 0.
func iban(s string, i int) int {
	want := ibanLength[s[i:i+2]]
	if want == 0 {
		return 0
	}
	var buf [34]byte
	n, j := 0, i
	for j < len(s) && n < want {
		c := s[j]
		switch {
		case is(c, cUpper|cDigit):
			buf[n] = c
			n++
			j++
		case c == ' ' && n%4 == 0 && is(at(s, j+1), cUpper|cDigit):
			j++
		default:
			return 0
		}
	}
	if n != want || is(at(s, j), cWord) || !ibanChecksum(buf[:n]) {
		return 0
	}
	return j
}

// ibanChecksum is ISO 13616: move the first four characters to the end,
// read letters as 10..35, and the number mod 97 must be 1.
func ibanChecksum(b []byte) bool {
	r := 0
	for k := 0; k < len(b); k++ {
		c := b[(k+4)%len(b)]
		if c >= 'A' {
			r = (r*100 + int(c-'A'+10)) % 97
		} else {
			r = (r*10 + int(c-'0')) % 97
		}
	}
	return r == 1
}
