package hwsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// obj is a JavaScript object as the runtime builds one: members keep their
// insertion order, assigning an existing key keeps its place, and a member
// never set is absent (JSON.stringify drops undefined).
type obj struct {
	keys []string
	vals map[string]any
}

// newObj builds an object from key, value pairs; a nil value is skipped (undefined).
// Use null{} for an explicit JSON null.
func newObj(kv ...any) *obj {
	o := &obj{vals: make(map[string]any)}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != nil {
			o.set(kv[i].(string), kv[i+1])
		}
	}
	return o
}

// null is an explicit JSON null member.
type null struct{}

func (o *obj) set(k string, v any) *obj {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	return o
}

func (o *obj) get(k string) any { return o.vals[k] }

func (o *obj) has(k string) bool { _, ok := o.vals[k]; return ok }

func (o *obj) str(k string) string { s, _ := o.vals[k].(string); return s }

// spread is {...o}: a shallow copy, same order.
func (o *obj) spread() *obj {
	c := &obj{keys: append([]string(nil), o.keys...), vals: make(map[string]any, len(o.vals))}
	for k, v := range o.vals {
		c.vals[k] = v
	}
	return c
}

// stringify is JSON.stringify(v, null, indent): compact when indent is 0.
func stringify(v any, indent int) ([]byte, error) {
	var b bytes.Buffer
	if err := encode(&b, v); err != nil {
		return nil, err
	}
	if indent == 0 {
		return b.Bytes(), nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", strings.Repeat(" ", indent)); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func encode(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil, null:
		b.WriteString("null")
	case *obj:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := encode(b, x.vals[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encode(b, x[i]); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, x[i])
		}
		b.WriteByte(']')
	case string:
		writeString(b, x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(jsNumber(x))
	case json.RawMessage:
		b.Write(x)
	default:
		return fmt.Errorf("hwsim: cannot encode %T", v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Write(bytes.TrimRight(buf.Bytes(), "\n"))
}

// jsNumber formats a float as JavaScript's Number.prototype.toString does for
// the values the simulator writes.
func jsNumber(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1e-07 → 1e-7, 1e+21 stays
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + string(sign) + exp
}

// parse reads JSON into the simulator's values: *obj for objects (member
// order kept), []any, string, bool, null{}, and json.RawMessage for numbers
// (written back exactly as read).
func parse(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("hwsim: trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			o := newObj()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k.(string), v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("hwsim: unexpected %v", x)
	case json.Number:
		return json.RawMessage(x.String()), nil
	case nil:
		return null{}, nil
	}
	return tok, nil
}
