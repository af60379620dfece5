package executions

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// TestViewOfAFinalRecord: the view of a final record made here (from the
// envelope in memory) is the view of the same record read from the store
// (decoded from its encoding): the same JSON, and none of the envelope's
// fields that are not stored (json:"-"), however they were set. An end
// with an error is answered from its encoding.
func TestViewOfAFinalRecord(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name   string
		status dispatch.Status
		env    *dispatch.Envelope
		cached bool
	}{
		{"success", dispatch.StatusSuccess, &dispatch.Envelope{RequestID: "req", Tool: "echo", Data: json.RawMessage(`{"message":"hi"}`),
			StartedAt: now, DurationMS: 1.234}, true},
		{"cancelled with data", dispatch.StatusCancelled, &dispatch.Envelope{RequestID: "req", Tool: "echo", Data: json.RawMessage(`[1,2]`),
			StartedAt: now}, true},
		{"error", dispatch.StatusError, &dispatch.Envelope{RequestID: "req", Tool: "echo", StartedAt: now,
			Error: &dispatch.ErrorBody{Type: tools.SystemError, Code: tools.CodeInterrupted, Message: "m"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every field the store does not keep, set.
			ev := reflect.ValueOf(tc.env).Elem()
			unstored := 0
			for i := range ev.NumField() {
				if ev.Type().Field(i).Tag.Get("json") != "-" {
					continue
				}
				unstored++
				f := ev.Field(i)
				switch f.Kind() {
				case reflect.Bool:
					f.SetBool(true)
				case reflect.Pointer:
					f.Set(reflect.New(f.Type().Elem()))
				case reflect.Slice:
					f.Set(reflect.MakeSlice(f.Type(), 1, 1))
				default:
					t.Fatalf("set the unstored field %s of kind %s here", ev.Type().Field(i).Name, f.Kind())
				}
			}
			if unstored == 0 {
				t.Fatal("no unstored field found: the test checks nothing")
			}
			r := &Record{ID: "0123456789abcdef01234567", Caller: "k", Kind: "call", Tool: "echo", RequestID: "req",
				Status: dispatch.StatusRunning, Step: 1, CreatedAt: now, UpdatedAt: now}
			done, err := apply(r, ended(tc.status, tc.env, now))
			if err != nil {
				t.Fatal(err)
			}
			if done.env == nil {
				t.Fatal("final kept no envelope in memory")
			}
			read, err := decodeRecord(done.encode())
			if err != nil {
				t.Fatal(err)
			}
			here, there := done.View(), read.View()
			if got, want := string(here.AppendJSON(nil)), string(there.AppendJSON(nil)); got != want {
				t.Errorf("view here  %s\nview read %s", got, want)
			}
			hv := reflect.ValueOf(here).Elem()
			for i := range hv.NumField() {
				if hv.Type().Field(i).Tag.Get("json") == "-" && !hv.Field(i).IsZero() {
					t.Errorf("the view carries the unstored field %s", hv.Type().Field(i).Name)
				}
			}
			// With its stored bytes gone, only the envelope in memory can
			// give the final view.
			memoryOnly := *done
			memoryOnly.Envelope = nil
			if cached := string(memoryOnly.View().AppendJSON(nil)) == string(there.AppendJSON(nil)); cached != tc.cached {
				t.Errorf("answered from memory: %v, want %v", cached, tc.cached)
			}
			if here.Error != nil && here.Error == tc.env.Error {
				t.Error("an error's view shares the error another waiter may redact")
			}
		})
	}
}
