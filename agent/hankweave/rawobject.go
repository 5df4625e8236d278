package hankweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// RawObject is a JSON object as it was read: every member, in file order, with
// its value's bytes untouched. Each typed struct of this package keeps one, so
// that writing the struct back preserves the fields cairn does not know and
// the order of all of them.
//
// A value that was not a JSON object at all (null, a number, …) is kept too and
// written back as it was.
type RawObject struct {
	fields    []RawField
	nonObject json.RawMessage
}

// RawField is one member of a RawObject.
type RawField struct {
	Key   string
	Value json.RawMessage
}

// Fields returns the members in file order. The slice is a copy; the values are not.
func (o RawObject) Fields() []RawField { return append([]RawField(nil), o.fields...) }

// Len is the number of members.
func (o RawObject) Len() int { return len(o.fields) }

// IsObject reports whether the value read was a JSON object (or nothing was read).
func (o RawObject) IsObject() bool { return o.nonObject == nil }

// Get returns the raw value of key.
func (o RawObject) Get(key string) (json.RawMessage, bool) {
	for _, f := range o.fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Set replaces the value of key where it stands, or appends it (as a
// JavaScript object does). value must be valid JSON. Copies of the RawObject
// made before are not affected.
func (o *RawObject) Set(key string, value json.RawMessage) {
	o.nonObject = nil
	fields := make([]RawField, len(o.fields), len(o.fields)+1)
	copy(fields, o.fields)
	o.fields = fields
	for i := range o.fields {
		if o.fields[i].Key == key {
			o.fields[i].Value = value
			return
		}
	}
	o.fields = append(o.fields, RawField{Key: key, Value: value})
}

// Delete removes key. Copies of the RawObject made before are not affected.
func (o *RawObject) Delete(key string) {
	out := make([]RawField, 0, len(o.fields))
	for _, f := range o.fields {
		if f.Key != key {
			out = append(out, f)
		}
	}
	o.fields = out
}

func (o RawObject) clone() RawObject {
	return RawObject{fields: append([]RawField(nil), o.fields...), nonObject: o.nonObject}
}

// parseRawObject splits a JSON value into its members. A valid JSON value
// that is not an object is kept as nonObject. Later duplicates of a key
// replace the earlier value in place, as JSON.parse does. data must be valid
// JSON (see jsonscan.go); anything else is an error, never a panic.
func parseRawObject(data []byte) (RawObject, error) {
	i := skipWS(data, 0)
	if i >= len(data) {
		return RawObject{}, errors.New("empty JSON value")
	}
	if data[i] != '{' {
		end := valueEnd(data, i)
		if end <= i || skipWS(data, end) != len(data) {
			return RawObject{}, errShape
		}
		return RawObject{nonObject: append(json.RawMessage(nil), data[i:end]...)}, nil
	}
	o := RawObject{fields: []RawField{}}
	dups := false
	err := splitObject(data, func(key string, value []byte) {
		if !dups {
			for _, f := range o.fields {
				if f.Key == key {
					dups = true
					break
				}
			}
		}
		if dups {
			for i := range o.fields {
				if o.fields[i].Key == key {
					o.fields[i].Value = value
					return
				}
			}
		}
		o.fields = append(o.fields, RawField{Key: key, Value: value})
	})
	if err != nil {
		return RawObject{}, err
	}
	return o, nil
}

// ParseRawObject reads a JSON value as a RawObject: an object's members in
// order, values untouched (a value that is not an object is kept whole:
// IsObject says which). Invalid JSON is an error.
func ParseRawObject(data []byte) (RawObject, error) {
	if !json.Valid(data) {
		return RawObject{}, errors.New("not valid JSON")
	}
	return parseRawObject(data)
}

// MarshalJSON writes the object compactly, members in order, values as they
// were read or set.
func (o RawObject) MarshalJSON() ([]byte, error) { return o.marshal(), nil }

// marshal writes the object compactly (values keep their own bytes; json.Indent
// or the encoder normalises the spacing afterwards).
func (o RawObject) marshal() []byte {
	if o.nonObject != nil {
		return append([]byte(nil), o.nonObject...)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := MarshalNoEscape(f.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(f.Value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// MarshalNoEscape is json.Marshal without HTML escaping (JSON.stringify does
// not escape <, > and &; a shell command's && stays as written) and without
// the encoder's trailing newline.
func MarshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// knownField is one json-tagged field of a typed struct.
type knownField struct {
	index     int
	name      string
	omitEmpty bool
}

var knownFieldsCache sync.Map // reflect.Type → []knownField

var rawObjectType = reflect.TypeOf(RawObject{})

func knownFields(t reflect.Type) []knownField {
	if v, ok := knownFieldsCache.Load(t); ok {
		return v.([]knownField)
	}
	var out []knownField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() || sf.Type == rawObjectType {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		out = append(out, knownField{index: i, name: name, omitEmpty: strings.Contains(","+opts+",", ",omitempty,")})
	}
	knownFieldsCache.Store(t, out)
	return out
}

// decodeKnown parses data into raw and fills the known fields of the struct
// dst points to. It is lenient: a member whose value does not fit its Go type
// leaves that field zero (and its bytes stay in raw, written back untouched).
// A value that is not an object leaves every field zero.
func decodeKnown(data []byte, raw *RawObject, dst any) error {
	o, err := parseRawObject(data)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(dst).Elem()
	v.Set(reflect.Zero(v.Type()))
	*raw = o
	if !o.IsObject() {
		return nil
	}
	for _, kf := range knownFields(v.Type()) {
		b, ok := o.Get(kf.name)
		if !ok {
			continue
		}
		decodeValue(b, v.Field(kf.index))
	}
	return nil
}

// encodeKnown writes the struct src back over raw: members keep their order;
// a known field whose value is unchanged keeps its original bytes; a changed
// one is replaced in place; a new one is appended; an omitempty field that
// became empty is removed. Unknown members are written as they were read.
func encodeKnown(raw RawObject, src any) ([]byte, error) {
	if !raw.IsObject() {
		return raw.marshal(), nil
	}
	v := reflect.ValueOf(src)
	out := raw.clone()
	for _, kf := range knownFields(v.Type()) {
		fv := v.Field(kf.index)
		empty := isEmptyJSON(fv)
		old, had := raw.Get(kf.name)
		if had {
			// Unchanged (equal to what the raw bytes decode to): keep the bytes.
			p := reflect.New(fv.Type()).Elem()
			if !decodeValue(old, p) {
				if empty {
					continue // a value we could not read and did not set: keep it
				}
			} else if reflect.DeepEqual(p.Interface(), fv.Interface()) {
				continue
			}
		}
		if kf.omitEmpty && empty {
			out.Delete(kf.name)
			continue
		}
		var nb []byte
		if fv.Kind() == reflect.Slice && fv.IsNil() && fv.Type() != rawMessageType {
			nb = []byte("[]") // a list the runtime always writes (codons, runs, …) is never null
		} else {
			var err error
			if nb, err = MarshalNoEscape(fv.Interface()); err != nil {
				return nil, fmt.Errorf("field %s: %w", kf.name, err)
			}
		}
		out.Set(kf.name, nb)
	}
	if out.fields == nil {
		out.fields = []RawField{}
	}
	return out.marshal(), nil
}

// isEmptyJSON is encoding/json's omitempty test.
func isEmptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}
