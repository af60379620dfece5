package sanitize

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The canary corpus is generated, so every value is fake yet valid in
// format (card check digits, IBAN checksums, base32 AWS ids) and the
// generator documents how. Regenerate with:
//
//	go test ./internal/sanitize -run TestGenerateCorpus -update
var update = flag.Bool("update", false, "regenerate testdata/canary and the generated testdata/clean files")

// canaryFile is one file of the manifest: the kind it exercises and the
// values that must not survive sanitization.
type canaryFile struct {
	Kind   string   `json:"kind"`
	Values []string `json:"values"`
}

type gen struct{ r *rand.Rand }

const (
	upperB32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	alnum    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b64url   = alnum + "_-"
	b64std   = alnum + "+/"
	hexLower = "0123456789abcdef"
	digitSet = "0123456789"
)

func (g gen) str(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	return string(b)
}

// token draws from alphabet until the value holds a digit, as real keys
// almost always do.
func (g gen) token(alphabet string, n int) string {
	for {
		if v := g.str(alphabet, n); strings.ContainsAny(v, digitSet) {
			return v
		}
	}
}

// luhnComplete appends the check digit that makes prefix+digit pass Luhn.
func luhnComplete(prefix string) string {
	for d := '0'; d <= '9'; d++ {
		if c := prefix + string(d); luhnOK(c) {
			return c
		}
	}
	panic("unreachable")
}

func luhnOK(s string) bool {
	sum, dbl := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		v := int(s[i] - '0')
		if dbl {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum, dbl = sum+v, !dbl
	}
	return sum%10 == 0
}

// ibanFor computes the ISO 13616 check digits for a country and BBAN.
func ibanFor(cc, bban string) string {
	var num strings.Builder
	for _, c := range bban + cc + "00" {
		if c >= 'A' {
			fmt.Fprintf(&num, "%d", c-'A'+10)
		} else {
			num.WriteRune(c)
		}
	}
	n, _ := new(big.Int).SetString(num.String(), 10)
	check := 98 - new(big.Int).Mod(n, big.NewInt(97)).Int64()
	return fmt.Sprintf("%s%02d%s", cc, check, bban)
}

func group4(s string) string {
	var parts []string
	for len(s) > 4 {
		parts, s = append(parts, s[:4]), s[4:]
	}
	return strings.Join(append(parts, s), " ")
}

func (g gen) pem(label string, lines int) string {
	var b strings.Builder
	b.WriteString("-----BEGIN " + label + "-----\n")
	for range lines {
		b.WriteString(g.str(b64std, 64) + "\n")
	}
	b.WriteString(g.str(b64std, 20) + "==\n-----END " + label + "-----")
	return b.String()
}

func (g gen) jwt() string {
	enc := base64.RawURLEncoding.EncodeToString
	claims := fmt.Sprintf(`{"sub":"%d","name":"Test User","iat":%d,"exp":%d}`, g.r.IntN(1e9), 1700000000+g.r.IntN(1e7), 1800000000+g.r.IntN(1e7))
	return enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "." + g.str(b64url, 43)
}

func (g gen) ssn() string {
	for {
		a := 1 + g.r.IntN(899)
		if a != 666 {
			return fmt.Sprintf("%03d-%02d-%04d", a, 1+g.r.IntN(99), 1+g.r.IntN(9999))
		}
	}
}

// canaries builds every canary file: text, kind, and the values.
func canaries(g gen) map[string]func() (string, []string) {
	return map[string]func() (string, []string){
		"aws_access_key_id": func() (string, []string) {
			a, b, c := "AKIA"+g.str(upperB32, 16), "ASIA"+g.str(upperB32, 16), "AKIA"+g.str(upperB32, 16)
			return fmt.Sprintf("[default]\naws_access_key_id = %s\nregion = eu-west-1\n\n$ aws sts get-session-token\n{\"Credentials\": {\"AccessKeyId\": \"%s\", \"Expiration\": \"2026-11-21T12:00:00Z\"}}\nexport AWS_ACCESS_KEY_ID=%s\n", a, b, c), []string{a, b, c}
		},
		"aws_secret_access_key": func() (string, []string) {
			a, b, c := g.token(b64std, 40), g.token(b64std, 40), g.token(b64std, 40)
			return fmt.Sprintf("[default]\naws_secret_access_key = %s\n\n{\"Credentials\": {\"SecretAccessKey\": \"%s\"}}\nAWS_SECRET_ACCESS_KEY=%s terraform apply\n", a, b, c), []string{a, b, c}
		},
		"gcp_api_key": func() (string, []string) {
			a, b := "AIza"+g.token(b64url, 35), "AIza"+g.token(b64url, 35)
			return fmt.Sprintf("GET https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key=%s\nconst firebaseConfig = { apiKey: \"%s\", projectId: \"demo-app\" };\n", a, b), []string{a, b}
		},
		"gcp_service_account_key": func() (string, []string) {
			body := g.pem("PRIVATE KEY", 25)
			esc, _ := json.Marshal(body + "\n")
			inner := strings.Trim(string(esc), `"`)
			text := fmt.Sprintf("$ cat key.json\n{\n  \"type\": \"service_account\",\n  \"project_id\": \"demo-project-123\",\n  \"private_key_id\": \"%s\",\n  \"private_key\": %s,\n  \"client_id\": \"1%s\"\n}\n", g.str(hexLower, 40), esc, g.str(digitSet, 20))
			lines := strings.Split(body, "\n")
			return text, []string{inner[:80], lines[5], lines[20]}
		},
		"azure_storage_key": func() (string, []string) {
			a, b := g.token(b64std, 86)+"==", g.token(b64std, 86)+"=="
			return fmt.Sprintf("DefaultEndpointsProtocol=https;AccountName=demostore;AccountKey=%s;EndpointSuffix=core.windows.net\nexport AZURE_STORAGE_KEY=%s\n", a, b), []string{a, b}
		},
		"github_token": func() (string, []string) {
			a, b, c := "ghp_"+g.token(alnum, 36), "ghs_"+g.token(alnum, 36), "github_pat_"+g.token(alnum, 22)+"_"+g.token(alnum, 59)
			return fmt.Sprintf("$ git remote -v\norigin https://%s@github.com/acme/app.git (fetch)\nGITHUB_TOKEN: %s\ncurl -H \"Authorization: token %s\" https://api.github.com/user\n", a, b, c), []string{a, b, c}
		},
		"gitlab_token": func() (string, []string) {
			a, b := "glpat-"+g.token(b64url, 20), "glpat-"+g.token(alnum, 20)
			return fmt.Sprintf("export GITLAB_TOKEN=%s\nglab auth login --token %s\n", a, b), []string{a, b}
		},
		"slack_token": func() (string, []string) {
			a := "xoxb-" + g.str(digitSet, 12) + "-" + g.str(digitSet, 13) + "-" + g.token(alnum, 24)
			b := "xoxp-" + g.str(digitSet, 12) + "-" + g.str(digitSet, 12) + "-" + g.str(digitSet, 13) + "-" + g.str(hexLower, 32)
			c := "xapp-1-A" + g.str(upperB32, 10) + "-" + g.str(digitSet, 13) + "-" + g.str(hexLower, 64)
			return fmt.Sprintf("SLACK_BOT_TOKEN=%s\nclient = WebClient(token=\"%s\")\napp_token: %s\n", a, b, c), []string{a, b, c}
		},
		"slack_webhook": func() (string, []string) {
			a := "https://hooks.slack.com/services/T" + g.str(upperB32, 8) + "/B" + g.str(upperB32, 10) + "/" + g.token(alnum, 24)
			return fmt.Sprintf("curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deploy done\"}' %s\n", a), []string{a}
		},
		"stripe_key": func() (string, []string) {
			a, b := "sk_live_"+g.token(alnum, 24), "rk_live_"+g.token(alnum, 99)
			return fmt.Sprintf("STRIPE_SECRET_KEY=%s\nstripe.api_key = \"%s\"\n", a, b), []string{a, b}
		},
		"openai_api_key": func() (string, []string) {
			a := "sk-proj-" + g.token(b64url, 58) + "T3BlbkFJ" + g.token(b64url, 58)
			b := "sk-" + g.token(alnum, 20) + "T3BlbkFJ" + g.token(alnum, 20)
			return fmt.Sprintf("OPENAI_API_KEY=%s\nclient = OpenAI(api_key=\"%s\")\n", a, b), []string{a, b}
		},
		"anthropic_api_key": func() (string, []string) {
			a, b := "sk-ant-api03-"+g.token(b64url, 93)+"AA", "sk-ant-admin01-"+g.token(b64url, 93)+"AA"
			return fmt.Sprintf("export ANTHROPIC_API_KEY=%s\ncurl https://api.anthropic.com/v1/organizations/users -H \"x-api-key: %s\"\n", a, b), []string{a, b}
		},
		"private_key": func() (string, []string) {
			rsa, ec := g.pem("RSA PRIVATE KEY", 25), g.pem("OPENSSH PRIVATE KEY", 6)
			r, e := strings.Split(rsa, "\n"), strings.Split(ec, "\n")
			return "$ cat ~/.ssh/id_rsa\n" + rsa + "\n$ cat ~/.ssh/id_ed25519\n" + ec + "\n", []string{r[3], r[25], e[2]}
		},
		"jwt": func() (string, []string) {
			a, b := g.jwt(), g.jwt()
			return fmt.Sprintf("Set-Cookie: session=%s; Path=/; HttpOnly\n{\"id_token\": \"%s\"}\n", a, b), []string{a, b}
		},
		"bearer_token": func() (string, []string) {
			a, b := g.token(alnum, 40), g.token(b64url, 32)
			return fmt.Sprintf("curl -H \"Authorization: Bearer %s\" https://api.example.org/v1/items\n> GET /v2/orders HTTP/1.1\n> authorization: bearer %s\n", a, b), []string{a, b}
		},
		"basic_auth": func() (string, []string) {
			a := base64.StdEncoding.EncodeToString([]byte("deploy:" + g.token(alnum, 14)))
			return fmt.Sprintf("> GET /artifactory/api/repositories HTTP/1.1\n> Authorization: Basic %s\n", a), []string{a}
		},
		"url_password": func() (string, []string) {
			a, b, c := g.token(alnum, 16), g.token(alnum, 12), g.token(alnum, 20)
			return fmt.Sprintf("DATABASE_URL=postgres://app:%s@db.internal:5432/orders?sslmode=require\nbroker: amqp://worker:%s@rabbitmq:5672/\nredis://:%s@cache-1.internal:6379/0\n", a, b, c), []string{a, b, c}
		},
		"password": func() (string, []string) {
			a, b, c, d, e := g.token(alnum, 14), g.token(alnum, 10), g.token(alnum, 12), g.token(alnum, 16), g.token(alnum, 9)
			return fmt.Sprintf("DB_PASSWORD=%s\nspring.datasource.password: \"%s\"\nServer=sql1;Database=orders;User Id=app;Password=%s;\njdbc:mysql://db:3306/shop?user=app&password=%s\n{\"username\": \"admin\", \"password\": \"%s\"}\n", a, b, c, d, e), []string{a, b, c, d, e}
		},
		"secret": func() (string, []string) {
			a, b, c, d := g.token(alnum, 32), g.token(b64url, 50), g.token(hexLower, 40), g.token(alnum, 24)
			return fmt.Sprintf("client_secret=%s\nSECRET_KEY = '%s'\n{\"api_key\": \"%s\"}\nauth_token: %s\n", a, b, c, d), []string{a, b, c, d}
		},
		"email": func() (string, []string) {
			vs := []string{"jane.doe@acme-mail.net", "j.smith+invoices@corp.example.co.uk", "ops_team@fake-domain.io"}
			return fmt.Sprintf("From: Jane Doe <%s>\nCc: %s\ncommit 3f2c9a1 Author: Ops <%s>\n", vs[0], vs[1], vs[2]), vs
		},
		"phone_number": func() (string, []string) {
			vs := []string{"+1 415 555 0132", "+44 20 7946 0958", "(212) 555-0147", "646-555-0199", "+49 30 9018 2011", "+33 1 23 45 67 89"}
			return fmt.Sprintf("Call %s or %s.\nOffice: %s, mobile %s\nBerlin: %s; Paris: %s\n", vs[0], vs[1], vs[2], vs[3], vs[4], vs[5]), vs
		},
		"payment_card": func() (string, []string) {
			visa := luhnComplete("4" + g.str(digitSet, 14))
			mc := luhnComplete("5" + string("12345"[g.r.IntN(5)]) + g.str(digitSet, 13))
			amex := luhnComplete("37" + g.str(digitSet, 12))
			disc := luhnComplete("6011" + g.str(digitSet, 11))
			vs := []string{group4(visa), strings.Join([]string{mc[:4], mc[4:8], mc[8:12], mc[12:]}, "-"), amex[:4] + " " + amex[4:10] + " " + amex[10:], disc}
			return fmt.Sprintf("card: %s\ncard_number=%s\nAmex %s exp 04/29\n{\"pan\": \"%s\"}\n", vs[0], vs[1], vs[2], vs[3]), vs
		},
		"iban": func() (string, []string) {
			de := ibanFor("DE", g.str(digitSet, 18))
			gb := ibanFor("GB", "WEST"+g.str(digitSet, 14))
			fr := ibanFor("FR", g.str(digitSet, 23))
			return fmt.Sprintf("IBAN: %s\nPay to %s (Acme Ltd)\niban=%s\n", group4(de), gb, fr), []string{group4(de), gb, fr}
		},
		"us_ssn": func() (string, []string) {
			a, b := g.ssn(), g.ssn()
			return fmt.Sprintf("SSN: %s\n{\"applicant\": {\"ssn\": \"%s\"}}\n", a, b), []string{a, b}
		},
		"ip_address": func() (string, []string) {
			a := fmt.Sprintf("203.0.113.%d", 1+g.r.IntN(254))
			b := fmt.Sprintf("198.51.100.%d", 1+g.r.IntN(254))
			c := fmt.Sprintf("2001:db8:%x::%x", g.r.IntN(65535), 1+g.r.IntN(65535))
			return fmt.Sprintf("%s - - [21/Nov/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200\nclient=%s upstream=[%s]:443\n", a, b, c), []string{a, b, c}
		},
	}
}

func TestGenerateCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate the corpus")
	}
	g := gen{rand.New(rand.NewPCG(4, 2026))}
	manifest := map[string]canaryFile{}
	all := canaries(g)
	for _, kind := range sortedKeys(all) {
		text, values := all[kind]()
		name := kind + ".txt"
		manifest[name] = canaryFile{Kind: kind, Values: values}
		writeFile(t, filepath.Join("testdata", "canary", name), text)
	}
	m, _ := json.MarshalIndent(manifest, "", "  ")
	writeFile(t, filepath.Join("testdata", "canary", "manifest.json"), string(m)+"\n")
	generateClean(t, g)
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// generateClean writes the clean files that need random content: base64
// image data, digests, and numbers that must not be taken for PII.
func generateClean(t *testing.T, g gen) {
	img := make([]byte, 6000)
	for i := range img {
		img[i] = byte(g.r.IntN(256))
	}
	copy(img, "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	b64 := base64.StdEncoding.EncodeToString(img)
	doc, _ := json.MarshalIndent(map[string]any{
		"id": "img_01HZX3K8Q2", "mime_type": "image/png", "width": 640, "height": 480,
		"data_uri": "data:image/png;base64," + b64[:2000], "thumbnail": b64[2000:6000], "content": b64[6000:],
	}, "", "  ")
	writeFile(t, filepath.Join("testdata", "clean", "image_base64.json"), string(doc)+"\n")

	var d strings.Builder
	for i := range 12 {
		fmt.Fprintf(&d, "%s  dist/toold_linux_amd64_%d.tar.gz\n", g.str(hexLower, 64), i)
	}
	for _, mod := range []string{"github.com/go-chi/chi/v5 v5.5.0", "go.uber.org/zap v1.28.0", "golang.org/x/text v0.43.0"} {
		h := base64.StdEncoding.EncodeToString([]byte(g.str(alnum, 32)))
		fmt.Fprintf(&d, "%s h1:%s\n%s/go.mod h1:%s\n", mod, h, mod, base64.StdEncoding.EncodeToString([]byte(g.str(alnum, 32))))
	}
	for range 4 {
		fmt.Fprintf(&d, "ghcr.io/acme/toold@sha256:%s\ncommit %s\n", g.str(hexLower, 64), g.str(hexLower, 40))
	}
	writeFile(t, filepath.Join("testdata", "clean", "digests.txt"), d.String())

	var n strings.Builder
	n.WriteString("# 16-digit numbers that fail the Luhn check, ids, counters, timestamps\n")
	for i := range 10 {
		c := luhnComplete("4" + g.str(digitSet, 14))
		bad := c[:15] + string('0'+(c[15]-'0'+1)%10)
		if i%2 == 0 {
			bad = group4(bad)
		}
		fmt.Fprintf(&n, "order %d: reference %s, total %d.%02d EUR, at %d\n", 100000+g.r.IntN(900000), bad, g.r.IntN(1000), g.r.IntN(100), 1763719200000+g.r.Int64N(1e9))
	}
	for range 5 {
		fmt.Fprintf(&n, "tracking %s%s shipped in %d ms, %d bytes\n", g.str(digitSet, 6), g.str(digitSet, 16), g.r.IntN(5000), g.r.IntN(1<<30))
	}
	writeFile(t, filepath.Join("testdata", "clean", "numbers.txt"), n.String())
}
