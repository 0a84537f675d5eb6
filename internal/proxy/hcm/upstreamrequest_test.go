package hcm

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestCopyRequestFieldsCoversEveryField gives every exported field of an
// http.Request a value of its own and checks that copyRequestFields carries
// each over to the same field, shallowly, and keeps the destination's context;
// and that the unexported fields are the ones it leaves out on purpose. A
// field net/http adds fails it.
func TestCopyRequestFieldsCoversEveryField(t *testing.T) {
	src := new(http.Request)
	v := reflect.ValueOf(src).Elem()
	var unexported []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			unexported = append(unexported, f.Name)
			continue
		}
		setOwnValue(t, f.Name, i, v.Field(i))
	}
	// The context is the destination's own; the ServeMux's state is never set
	// on the proxy's requests.
	if want := []string{"ctx", "pat", "matches", "otherValues"}; !reflect.DeepEqual(unexported, want) {
		t.Errorf("http.Request's unexported fields are %v, want %v: copyRequestFields may miss one", unexported, want)
	}
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "kept")
	dst := (&http.Request{}).WithContext(ctx)
	copyRequestFields(dst, src)
	d := reflect.ValueOf(dst).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		got, want := d.Field(i), v.Field(i)
		switch f.Type.Kind() {
		case reflect.Func, reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan:
			// The same one, not a copy: as WithContext's shallow copy.
			if got.Pointer() != want.Pointer() {
				t.Errorf("field %s not copied", f.Name)
			}
			continue
		}
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			t.Errorf("field %s not copied: %v, want %v", f.Name, got, want)
		}
	}
	if dst.Context() != ctx {
		t.Errorf("the destination's context was replaced")
	}
	copyRequestFields(dst, &http.Request{})
	if empty := (&http.Request{}).WithContext(ctx); !reflect.DeepEqual(dst, empty) {
		t.Errorf("copying an empty request left fields set: %+v", dst)
	}
}

// setOwnValue gives v, field i named name, a value no other field has.
func setOwnValue(t *testing.T, name string, i int, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(100 + i))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Chan:
		// Request.Cancel is receive-only: a channel both ways converts to it.
		v.Set(reflect.MakeChan(reflect.ChanOf(reflect.BothDir, v.Type().Elem()), 0).Convert(v.Type()))
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { panic("not called") }))
	case reflect.Interface:
		body := reflect.ValueOf(io.NopCloser(strings.NewReader(name)))
		if !body.Type().Implements(v.Type()) {
			t.Fatalf("field %s: interface %s has no test value", name, v.Type())
		}
		v.Set(body)
	default:
		t.Fatalf("field %s: kind %s has no test value", name, v.Kind())
	}
}
