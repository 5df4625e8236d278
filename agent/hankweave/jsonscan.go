package hankweave

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// A small scanner over JSON that encoding/json has already validated (every
// entry point checks json.Valid first, and encoding/json validates before it
// calls an UnmarshalJSON). It splits objects and arrays without decoding
// them, so each byte of a large state.json is looked at a few times rather
// than once per nesting level. It stays bounds-safe on any input.

var errShape = errors.New("malformed JSON")

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && !isWS(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	return j
}

// stringEnd returns the index just past the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// unquote decodes a JSON string literal; plain ones without a copy through encoding/json.
func unquote(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	plain := utf8.Valid(body)
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			plain = false
			break
		}
	}
	if plain {
		return string(body), true
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return "", false
	}
	return s, true
}

// splitObject returns the members of the object literal b, in order.
func splitObject(b []byte, each func(key string, value []byte)) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errShape
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errShape
		}
		kend := stringEnd(b, i)
		key, ok := unquote(b[i:kend])
		if !ok {
			return errShape
		}
		i = skipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return errShape
		}
		vstart := skipWS(b, i+1)
		vend := valueEnd(b, vstart)
		if vend <= vstart {
			return errShape
		}
		each(key, b[vstart:vend])
		i = skipWS(b, vend)
		if i >= len(b) {
			return errShape
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] != ',' {
			return errShape
		}
		i = skipWS(b, i+1)
	}
	return errShape
}

// splitArray returns the elements of the array literal b.
func splitArray(b []byte) ([][]byte, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, errShape
	}
	out := [][]byte{}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return out, nil
	}
	for i < len(b) {
		end := valueEnd(b, i)
		if end <= i {
			return nil, errShape
		}
		out = append(out, b[i:end])
		i = skipWS(b, end)
		if i >= len(b) {
			return nil, errShape
		}
		if b[i] == ']' {
			return out, nil
		}
		if b[i] != ',' {
			return nil, errShape
		}
		i = skipWS(b, i+1)
	}
	return nil, errShape
}

var (
	rawMessageType  = reflect.TypeOf(json.RawMessage(nil))
	unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

// decodeValue decodes the literal b into v (settable) as json.Unmarshal
// would, reporting false where json.Unmarshal would fail; v is then left as
// it was. Types of this package decode through their UnmarshalJSON directly.
func decodeValue(b []byte, v reflect.Value) bool {
	if len(b) == 0 {
		return false
	}
	isNull := b[0] == 'n'
	if v.Type() == rawMessageType {
		v.SetBytes(append([]byte(nil), b...))
		return true
	}
	if v.Kind() != reflect.Pointer && reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if isNull {
			return true
		}
		p := reflect.New(v.Type())
		if p.Interface().(json.Unmarshaler).UnmarshalJSON(b) != nil {
			return false
		}
		v.Set(p.Elem())
		return true
	}
	switch v.Kind() {
	case reflect.String:
		if isNull {
			return true
		}
		s, ok := unquote(b)
		if ok {
			v.SetString(s)
		}
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if isNull {
			return true
		}
		n, err := strconv.ParseInt(string(b), 10, v.Type().Bits())
		if err != nil {
			return false
		}
		v.SetInt(n)
		return true
	case reflect.Bool:
		switch string(b) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		case "null":
		default:
			return false
		}
		return true
	case reflect.Pointer:
		if isNull {
			v.SetZero()
			return true
		}
		p := reflect.New(v.Type().Elem())
		if !decodeValue(b, p.Elem()) {
			return false
		}
		v.Set(p)
		return true
	case reflect.Slice:
		if isNull {
			v.SetZero()
			return true
		}
		elems, err := splitArray(b)
		if err != nil {
			return false
		}
		s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		for i, e := range elems {
			if !decodeValue(e, s.Index(i)) {
				return false
			}
		}
		v.Set(s)
		return true
	}
	p := reflect.New(v.Type())
	if json.Unmarshal(b, p.Interface()) != nil {
		return false
	}
	v.Set(p.Elem())
	return true
}
