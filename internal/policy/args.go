package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
)

// Bounds of the arguments a decision converts: a call's arguments are
// bounded by its body already (size, depth); these keep the conversion
// bounded whoever calls it.
const (
	// MaxArgumentDepth is how deep converted arguments may nest.
	MaxArgumentDepth = 64
	// MaxArgumentValues is how many values (objects, arrays and scalars
	// together) converted arguments may hold.
	MaxArgumentValues = 1 << 16
)

// ErrArgumentsTooLarge is the conversion's refusal of arguments past its
// bounds; a decision that needs them refuses the call.
var ErrArgumentsTooLarge = errors.New("the arguments are too large or too deep for a policy to decide on")

// Arguments converts a call's decoded arguments (strictjson's tree:
// map[string]any, []any, string, json.Number, bool, nil) into a Cedar
// value, as context.arguments holds them:
//
//   - an object is a record (any key, non-ASCII included); a member whose
//     value is null is left out, as Cedar has no null;
//   - an array is a set (Cedar's: order and duplicates are lost); null
//     elements are left out;
//   - a number is a Long when it is a whole number within 64 bits (1e3 and
//     2.0 included), a decimal when it has at most four decimal places
//     within the decimal's range, and otherwise the string of its JSON
//     text, exactly: a comparison of it with a number then fails, so a
//     forbid on it refuses, rather than a rounded value passing;
//   - strings and booleans are themselves.
//
// Past MaxArgumentDepth or MaxArgumentValues it returns
// ErrArgumentsTooLarge; the work is linear in the tree's size.
func Arguments(v any) (types.Value, error) {
	c := converter{left: MaxArgumentValues}
	return c.value(v, 0)
}

type converter struct {
	left int // values still allowed
}

func (c *converter) value(v any, depth int) (types.Value, error) {
	if c.left--; c.left < 0 || depth > MaxArgumentDepth {
		return nil, ErrArgumentsTooLarge
	}
	switch x := v.(type) {
	case map[string]any:
		m := make(types.RecordMap, len(x))
		for k, e := range x {
			if e == nil {
				continue
			}
			cv, err := c.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			m[types.String(k)] = cv
		}
		return types.NewRecord(m), nil
	case []any:
		vs := make([]types.Value, 0, len(x))
		for _, e := range x {
			if e == nil {
				continue
			}
			cv, err := c.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			vs = append(vs, cv)
		}
		return types.NewSet(vs...), nil
	case string:
		return types.String(x), nil
	case bool:
		return types.Boolean(x), nil
	case json.Number:
		return number(string(x)), nil
	case float64: // a tree built by encoding/json
		return number(strconv.FormatFloat(x, 'g', -1, 64)), nil
	case int:
		return types.Long(x), nil
	case int64:
		return types.Long(x), nil
	case nil:
		return types.NewRecord(nil), nil // only at the top: arguments of {}
	}
	return nil, fmt.Errorf("policy: arguments hold a %T, which is not JSON", v)
}

// maxExponent bounds a number's exponent before it is worked out exactly:
// past it the number is neither a Long nor a decimal anyway, and
// 1e999999999 would cost big.Rat a billion digits.
const maxExponent = 40

// number is a JSON number as a Cedar value (see Arguments).
func number(s string) types.Value {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return types.Long(n)
	}
	mant, exp, ok := strings.Cut(strings.ToLower(s), "e")
	if ok {
		e, err := strconv.Atoi(exp)
		if err != nil || e > maxExponent || e < -maxExponent {
			return types.String(s)
		}
	}
	if len(mant) > 64 {
		return types.String(s)
	}
	r, good := new(big.Rat).SetString(s)
	if !good {
		return types.String(s)
	}
	if r.IsInt() && r.Num().IsInt64() {
		return types.Long(r.Num().Int64())
	}
	// A decimal is a 64-bit count of ten-thousandths.
	scaled := new(big.Rat).Mul(r, big.NewRat(10000, 1))
	if scaled.IsInt() && scaled.Num().IsInt64() {
		if d, err := types.NewDecimal(scaled.Num().Int64(), -4); err == nil {
			return d
		}
	}
	return types.String(s)
}
