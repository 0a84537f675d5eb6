package hcm

import (
	"context"
	"net/http"
	"reflect"
	"testing"
)

// TestCopyRequestFieldsCoversEveryField gives every exported field of an
// http.Request a value and checks that copyRequestFields carries each over
// and keeps the destination's context: a field net/http adds, and the copy
// misses, fails it.
func TestCopyRequestFieldsCoversEveryField(t *testing.T) {
	src := new(http.Request)
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		setNonZero(t, f.Name, v.Field(i))
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
		if f.Type.Kind() == reflect.Func { // functions compare by their code only
			if got.Pointer() != want.Pointer() {
				t.Errorf("field %s not copied", f.Name)
			}
			continue
		}
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			t.Errorf("field %s not copied: %v, want %v", f.Name, d.Field(i), v.Field(i))
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

// setNonZero gives v a value other than its zero value.
func setNonZero(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
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
		v.Set(reflect.ValueOf(http.NoBody))
	default:
		t.Fatalf("field %s: kind %s has no test value", name, v.Kind())
	}
}
