package tools

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/strictjson"
)

type inner struct {
	Name string   `json:"name"`
	Tags []string `json:"tags,omitempty"`
}

type Embedded struct {
	Level int `json:"level"`
}

// shape has every kind assign handles, and none whose form differs
// between a tree and encoding/json (no any), so both decoders must agree.
type shape struct {
	Embedded
	S     string            `json:"s"`
	B     bool              `json:"b"`
	I     int               `json:"i"`
	I8    int8              `json:"i8"`
	U     uint16            `json:"u"`
	F     float64           `json:"f"`
	P     *int              `json:"p"`
	List  []inner           `json:"list"`
	Arr   [2]int            `json:"arr"`
	M     map[string]int    `json:"m"`
	When  time.Time         `json:"when"`
	Raw   json.RawMessage   `json:"raw"`
	Bytes []byte            `json:"bytes"`
	Named map[string]string `json:"named,omitempty"`
	Skip  string            `json:"-"`
}

// marshal is how two decodings are compared: they store the same when
// they encode the same JSON value (key order aside).
func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var norm any
	if err := json.Unmarshal(b, &norm); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(norm)
	return string(b)
}

func TestAssignMatchesDecoding(t *testing.T) {
	in := `{"level":3,"s":"x","b":true,"i":-7,"i8":12,"u":65535,"f":1.5,"p":9,"list":[{"name":"a","tags":["t"]},{"name":"b"}],
		"arr":[1,2],"m":{"k":1},"when":"2026-11-21T10:00:00.5Z","raw":{"z":[1,2]},"bytes":"aGk=","named":{"a":"b"}}`
	var want, got shape
	if err := jsonv2.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	tree, err := strictjson.Decode([]byte(in), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := assign(reflect.ValueOf(&got).Elem(), tree, nil); err != nil {
		t.Fatal(err)
	}
	if w, g := marshal(t, want), marshal(t, got); w != g {
		t.Errorf("decoded %s\nassigned %s", w, g)
	}
}

func TestAssignRefusesMismatches(t *testing.T) {
	tests := []struct {
		in, pointer string
	}{
		{`{"i8":300}`, "/i8"},
		{`{"u":-1}`, "/u"},
		{`{"i":1.5}`, "/i"},
		{`{"s":1}`, "/s"},
		{`{"list":[{"name":2}]}`, "/list/0/name"},
		{`{"arr":[1]}`, ""},
		{`{"when":"yesterday"}`, "/when"},
		{`{"m":{"a/b~":"x"}}`, "/m/a~1b~0"},
		{`{"s":"ok","list":[{"name":"a"},{"name":"b"},{"name":[]}]}`, "/list/2/name"},
		{`{"level":"high"}`, "/level"},
	}
	for _, tt := range tests {
		tree, _ := strictjson.Decode([]byte(tt.in), 0)
		var got shape
		err := assign(reflect.ValueOf(&got).Elem(), tree, nil)
		te, ok := AsError(err)
		if !ok || te.Kind != ValidationError {
			t.Errorf("%s: %v, want a validation error", tt.in, err)
			continue
		}
		if tt.pointer != "" && (len(te.Fields) == 0 || te.Fields[0].Pointer != tt.pointer) {
			t.Errorf("%s: fields %+v, want %s", tt.in, te.Fields, tt.pointer)
		}
	}
}

func TestAssignKeepsAnyAsTree(t *testing.T) {
	var got struct {
		Data map[string]any `json:"data"`
		Any  any            `json:"any"`
	}
	tree, _ := strictjson.Decode([]byte(`{"data":{"n":12345678901234567890},"any":[1,"x"]}`), 0)
	if err := assign(reflect.ValueOf(&got).Elem(), tree, nil); err != nil {
		t.Fatal(err)
	}
	if got.Data["n"] != json.Number("12345678901234567890") {
		t.Errorf("a big number lost precision: %#v", got.Data["n"])
	}
	if diff := cmp.Diff([]any{json.Number("1"), "x"}, got.Any); diff != "" {
		t.Error(diff)
	}
}

// FuzzAssign holds assign to the JSON decoder: an input one refuses the
// other refuses too, and whatever both accept, they store the same.
func FuzzAssign(f *testing.F) {
	f.Add(`{"s":"x","i":1,"list":[{"name":"a"}],"m":{"a":1}}`)
	f.Add(`{"level":-1,"u":0,"f":1e3,"arr":[0,0],"p":null}`)
	f.Add(`{"raw":{"b":1,"a":[2,{"d":1,"c":0}]}}`)
	for _, refused := range []string{`{"i8":300}`, `{"u":-1}`, `{"s":1}`, `{"arr":[1,2,3]}`, `{"i":1.5}`} {
		f.Add(refused) // by both: one refusal each, so a mutation finds its neighbours
	}
	f.Fuzz(func(t *testing.T, in string) {
		tree, err := strictjson.Decode([]byte(in), 16)
		if err != nil {
			return
		}
		var a, b shape
		aerr := assign(reflect.ValueOf(&a).Elem(), tree, nil)
		berr := jsonv2.Unmarshal([]byte(in), &b)
		if (aerr != nil) != (berr != nil) {
			t.Fatalf("%s:\nassign  %v\ndecoder %v", in, aerr, berr)
		}
		if aerr != nil {
			return
		}
		if w, g := marshal(t, b), marshal(t, a); w != g {
			t.Fatalf("%s:\ndecoded  %s\nassigned %s", in, w, g)
		}
	})
}
