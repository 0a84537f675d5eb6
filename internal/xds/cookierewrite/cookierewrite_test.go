package cookierewrite

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
	"google.golang.org/protobuf/types/known/structpb"
)

// envoyLua runs Script as Envoy would on a response with the given Set-Cookie values:
// gopher-lua stands in for Envoy's LuaJIT (Envoy cannot be installed here), with a
// response handle offering the calls the script makes, as Envoy documents them
// (filterContext as a table, headers getNumValues/getAtIndex/remove/add).
func envoyLua(t *testing.T, ctx *structpb.Struct, cookies []string) []string {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	if err := L.DoString(Script); err != nil {
		t.Fatal(err)
	}
	headers := append([]string(nil), cookies...)
	hmeta := L.NewTable()
	hmeta.RawSetString("getNumValues", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(len(headers)))
		return 1
	}))
	hmeta.RawSetString("getAtIndex", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(headers[L.CheckInt(3)]))
		return 1
	}))
	hmeta.RawSetString("remove", L.NewFunction(func(L *lua.LState) int { headers = nil; return 0 }))
	hmeta.RawSetString("add", L.NewFunction(func(L *lua.LState) int {
		headers = append(headers, L.CheckString(3))
		return 0
	}))
	handle := L.NewTable()
	handle.RawSetString("headers", L.NewFunction(func(L *lua.LState) int { L.Push(hmeta); return 1 }))
	handle.RawSetString("filterContext", L.NewFunction(func(L *lua.LState) int { L.Push(toLua(L, structpb.NewStructValue(ctx))); return 1 }))
	if err := L.CallByParam(lua.P{Fn: L.GetGlobal("envoy_on_response"), Protect: true}, handle); err != nil {
		t.Fatal(err)
	}
	return headers
}

func toLua(L *lua.LState, v *structpb.Value) lua.LValue {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		t := L.NewTable()
		for name, f := range k.StructValue.GetFields() {
			t.RawSetString(name, toLua(L, f))
		}
		return t
	case *structpb.Value_ListValue:
		t := L.NewTable()
		for _, e := range k.ListValue.GetValues() {
			t.Append(toLua(L, e))
		}
		return t
	case *structpb.Value_StringValue:
		return lua.LString(k.StringValue)
	case *structpb.Value_BoolValue:
		return lua.LBool(k.BoolValue)
	case *structpb.Value_NumberValue:
		return lua.LNumber(k.NumberValue)
	}
	return lua.LNil
}

// The embedded proxy's Rewrite does what Script does in Envoy, cookie by cookie.
func TestRewriteIsTheScript(t *testing.T) {
	yes, no := true, false
	rules := []Rule{
		{Name: "session", Path: "/app", Domain: "example.com", Secure: &yes, SameSite: "Strict"},
		{Name: "prefs", Secure: &no},
		{Name: "lang", SameSite: "Lax"},
	}
	ctx, err := Context(rules)
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromContext(ctx)
	if err != nil || !cmp.Equal(back, rules) {
		t.Fatalf("FromContext(Context(rules)) = %+v, %v", back, err)
	}
	cookies := []string{
		"session=abc; Path=/; Domain=old.example.com; HttpOnly",
		"session=abc",
		" session = x ;Path=/a;;secure; samesite=none",
		"prefs=dark; Secure; Max-Age=60",
		"lang=en; SameSite=None; Secure",
		"other=1; Path=/",
		"malformed",
		"=novalue; Path=/",
		"session=a=b; PATH=/x; Expires=Wed, 21 Oct 2026 07:28:00 GMT",
	}
	got := envoyLua(t, ctx, cookies)
	if len(got) != len(cookies) {
		t.Fatalf("the script left %d cookies of %d: %q", len(got), len(cookies), got)
	}
	for i, c := range cookies {
		if want := Rewrite(c, rules); got[i] != want {
			t.Errorf("%q: Envoy's script gives %q, the embedded proxy %q", c, got[i], want)
		}
	}
	if want := "session=abc; HttpOnly; Path=/app; Domain=example.com; Secure; SameSite=Strict"; got[0] != want {
		t.Errorf("rewritten: %q, want %q", got[0], want)
	}
	if got := envoyLua(t, ctx, nil); len(got) != 0 {
		t.Errorf("a response without cookies got %q", got)
	}
}
