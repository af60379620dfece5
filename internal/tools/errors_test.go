package tools

import "testing"

func TestFieldErrorString(t *testing.T) {
	for _, tc := range []struct {
		f    FieldError
		want string
	}{
		{FieldError{Pointer: "/path", Message: "is required"}, "/path is required"},
		{FieldError{Message: "must be an object"}, "(the arguments) must be an object"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}
