package sanitize

import (
	"strings"
	"testing"
)

// TestDetectors: each kind found in its usual settings, and the look-alikes
// each one must leave alone (many found by running over GOROOT and the
// Python standard library, see TestRealWorldText).
func TestDetectors(t *testing.T) {
	s := newTB(t, withIP)
	cases := []struct{ in, want string }{
		// AWS, GCP, Azure
		{"id AKIAQYLPMN5HHHFPZAM2 ok", "id [REDACTED:aws_access_key_id] ok"},
		{"AKIAQYLPMN5HHHFPZAM2X", "AKIAQYLPMN5HHHFPZAM2X"}, // too long
		{"xAKIAQYLPMN5HHHFPZAM2", "xAKIAQYLPMN5HHHFPZAM2"}, // inside a word
		{"AKIAQYLPMN5HHHFPZAM1 ", "AKIAQYLPMN5HHHFPZAM1 "}, // '1' is not base32
		{`"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"`, `"SecretAccessKey": "[REDACTED:aws_secret_access_key]"`},
		{"key=AIzaSyA1234567890abcdefghijklmnopqrstuv&x", "key=[REDACTED:gcp_api_key]&x"},
		{"AccountKey=" + strings.Repeat("Ab1+", 22) + ";", "AccountKey=[REDACTED:azure_storage_key];"},
		// The value's 256-byte cap falls inside "é": the marker ends before it (found by FuzzStream).
		{"AccountKey=" + strings.Repeat("0", 255) + "é", "AccountKey=[REDACTED:azure_storage_key]é"},
		// Source control, chat, payments, model providers
		{"ghp_" + strings.Repeat("aB3", 12), "[REDACTED:github_token]"},
		{"ghp_short1234", "ghp_short1234"},
		{"glpat-abcdefghij0123456789", "[REDACTED:gitlab_token]"},
		{"xoxb-1234567890-abcdefghijk", "[REDACTED:slack_token]"},
		{"xoxb-short", "xoxb-short"},
		{"sk_live_abcdef0123456789", "[REDACTED:stripe_key]"},
		{"pk_live_abcdef0123456789", "pk_live_abcdef0123456789"}, // publishable
		{"sk-proj-abcdefghijklmnopqrstuvwxyz012345", "[REDACTED:openai_api_key]"},
		{"sk-ant-api03-" + strings.Repeat("xY9_", 10), "[REDACTED:anthropic_api_key]"},
		{"disk-abcdefghijklmnopqrstuvwxyz0123456789abcdef", "disk-abcdefghijklmnopqrstuvwxyz0123456789abcdef"},
		{"sk-learn is a nickname", "sk-learn is a nickname"},
		// Tokens, keys, credentials in text
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlc2lnbmF0dXJl.", "[REDACTED:jwt]."},
		{"eyJhbGciOiJIUzI1NiJ9 alone", "eyJhbGciOiJIUzI1NiJ9 alone"},
		{"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\nnext", "[REDACTED:private_key]\nnext"},
		{"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN (truncated)", "[REDACTED:private_key](truncated)"},
		{"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
		{"Authorization: Bearer abcdef0123456789abcdef", "Authorization: Bearer [REDACTED:bearer_token]"},
		{"Authorization: Basic ZGVwbG95OmhodW50ZXIy", "Authorization: Basic [REDACTED:basic_auth]"},
		{"use Bearer authentication for this API", "use Bearer authentication for this API"},
		{`req.Header.Set("Authorization", "Bearer "+token)`, `req.Header.Set("Authorization", "Bearer "+token)`},
		{"authorization = self.headers.get('authorization')", "authorization = self.headers.get('authorization')"},
		{"redis://:s3cretpass@cache:6379/0", "redis://:[REDACTED:url_password]@cache:6379/0"},
		{"https://user@example.com/path", "https://user@example.com/path"},
		{"https://hooks.slack.com/services/T0000/B0000/abcdefghijklmnopqrstuvwx", "[REDACTED:slack_webhook]"},
		// Assignments: literals in config, expressions in code
		{"DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED:password]"},
		{"DB_PASSWORD=correcthorse", "DB_PASSWORD=[REDACTED:password]"}, // env line: a word is a literal
		{"password: \"p4ss\"", "password: \"[REDACTED:password]\""},
		{"jdbc:mysql://db/shop?user=app&password=secret", "jdbc:mysql://db/shop?user=app&password=[REDACTED:password]"},
		{"Server=db;Pwd=Tr0ub4dor;", "Server=db;Pwd=[REDACTED:password];"},
		{"client_secret: abcdEFGH12345678", "client_secret: [REDACTED:secret]"},
		{"password := os.Getenv(\"DB_PASSWORD\")", "password := os.Getenv(\"DB_PASSWORD\")"},
		{"login(user, password=password)", "login(user, password=password)"},
		{"if password == \"\" {", "if password == \"\" {"},
		{"password: str = None", "password: str = None"},
		{"password: ${DB_PASSWORD}", "password: ${DB_PASSWORD}"},
		{"password: ********", "password: ********"},
		{`{"password": "Password"}`, `{"password": "Password"}`},
		{`{"password": "Enter your password"}`, `{"password": "Enter your password"}`},
		{"PWD=/home/me/project OLDPWD=/tmp", "PWD=/home/me/project OLDPWD=/tmp"},
		{"EMVSPASSWORD       = Errno(169)", "EMVSPASSWORD       = Errno(169)"},
		{"ERRORTOKEN = token.ERRORTOKEN", "ERRORTOKEN = token.ERRORTOKEN"},
		{`FTINTRP_W_D:  "FTINTRPWD",`, `FTINTRP_W_D:  "FTINTRPWD",`},
		{`com.Token = "// indirect"`, `com.Token = "// indirect"`},
		{"next_page_token: CAUQAAabcdef12", "next_page_token: CAUQAAabcdef12"},
		// PII
		{"mail jane.doe@example.org.", "mail [REDACTED:email]."},
		{"@dataclass and npm @types/node@22.9.0 and pkg@v1.2.3", "@dataclass and npm @types/node@22.9.0 and pkg@v1.2.3"},
		{"for m.Path@m.Version, git@github.com:o/r.git", "for m.Path@m.Version, git@github.com:o/r.git"},
		{"+1 415 555 0132", "[REDACTED:phone_number]"},
		{"(415) 555-0132 and 415.555.0132", "[REDACTED:phone_number] and [REDACTED:phone_number]"},
		{"Decimal('+35236450.6') 2026-11-21 10:00:00+01:00", "Decimal('+35236450.6') 2026-11-21 10:00:00+01:00"},
		{"123-456-7890", "123-456-7890"}, // NANP area codes start at 2
		{"4111 1111 1111 1111", "[REDACTED:payment_card]"},
		{"4111-1111-1111-1111 2024", "[REDACTED:payment_card] 2024"},
		{"4111 1111 1111 1112", "4111 1111 1111 1112"}, // Luhn fails
		{"1700000000000 ms", "1700000000000 ms"},       // no issuer starts with 1
		{"x = -4181792142133755926", "x = -4181792142133755926"},
		{"6559392774825876886", "6559392774825876886"}, // 19 contiguous digits: an int64
		{"DE89 3704 0044 0532 0130 00", "[REDACTED:iban]"},
		{"DE89 3704 0044 0532 0130 01", "DE89 3704 0044 0532 0130 01"}, // checksum fails
		{"SSN 078-05-1120", "SSN [REDACTED:us_ssn]"},
		{"666-12-3456 000-12-3456 123-00-4567", "666-12-3456 000-12-3456 123-00-4567"},
		{"from 203.0.113.7 via 2001:db8::1", "from [REDACTED:ip_address] via [REDACTED:ip_address]"},
		{"std::vector 10:00:00 999.1.1.1", "std::vector 10:00:00 999.1.1.1"},
	}
	for _, c := range cases {
		if got := s.RedactString("t", c.in); got != c.want {
			t.Errorf("RedactString(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestIdempotentNeighbours: a redaction changes the boundary its
// neighbour sees; the fixpoint keeps a second pass from finding more.
func TestIdempotentNeighbours(t *testing.T) {
	s := newTB(t, Config{})
	for _, in := range []string{
		"jane@example.com+14155550132",
		"DB_PASSWORD=x4111111111111111",
		"ghp_" + strings.Repeat("a1", 18) + "@example.com",
	} {
		once := s.RedactString("t", in)
		if twice := s.RedactString("t", once); twice != once {
			t.Errorf("%q: once %q, twice %q", in, once, twice)
		}
	}
}

func TestAllowListAndCustomPatterns(t *testing.T) {
	s := newTB(t, Config{
		Allow:    []string{"ops@acme.example", "AKIAQYLPMN5HHHFPZAM2"},
		Patterns: []Pattern{{Kind: "acme_key", Regex: `acme_[0-9a-f]{16}`}, {Kind: "employee_id", Regex: `emp=(E\d{6})`, Group: 1, Class: "pii"}},
	})
	in := "ops@acme.example jane@acme.example AKIAQYLPMN5HHHFPZAM2 acme_0123456789abcdef emp=E123456"
	want := "ops@acme.example [REDACTED:email] AKIAQYLPMN5HHHFPZAM2 [REDACTED:acme_key] emp=[REDACTED:employee_id]"
	if got := s.RedactString("t", in); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestValidators(t *testing.T) {
	for _, c := range []struct {
		card string
		ok   bool
	}{{"4111111111111111", true}, {"5555555555554444", true}, {"378282246310005", true}, {"6011111111111117", true},
		{"4111111111111112", false}, {"1234567812345670", false}, {"9111111111111111", false}} {
		if got := validCard([]byte(c.card)); got != c.ok {
			t.Errorf("validCard(%s) = %v", c.card, got)
		}
	}
	for _, c := range []struct {
		iban string
		ok   bool
	}{{"GB82WEST12345698765432", true}, {"DE89370400440532013000", true}, {"FR1420041010050500013M02606", true},
		{"GB82WEST12345698765433", false}, {"NL91ABNA0417164300", true}} {
		if got := iban(c.iban, 0) > 0; got != c.ok {
			t.Errorf("iban(%s) = %v", c.iban, got)
		}
	}
}
