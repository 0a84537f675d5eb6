// Package cookierewrite is how Portico rewrites the attributes of the cookies a
// backend sets (HTTPProxy cookieRewritePolicies), on both data planes. Envoy has no
// filter for it, so, as Contour does, Envoy runs a Lua script: one fixed script
// (Script), whose rules come in the per-route filter_context (Context). The embedded
// proxy implements exactly that script (Rewrite) and refuses any other Lua code: the
// translator and the proxy share this package so that the two cannot drift.
package cookierewrite

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Script is the Lua code of every cookie rewrite. For each Set-Cookie of the response
// whose cookie has a rule, the attributes the rule sets (Path, Domain, Secure,
// SameSite) replace the cookie's own; everything else is kept as it was.
const Script = `-- Portico cookie rewrite (cookieRewritePolicies): the rules are the route's filter_context.
local function rewrite(cookie, rules)
  local name = string.match(cookie, "^%s*([^=;%s]+)%s*=")
  local rule = name and rules[name]
  if not rule then
    return cookie
  end
  local parts = {}
  local first = true
  for part in string.gmatch(cookie, "[^;]+") do
    if first then
      parts[#parts + 1] = part
      first = false
    else
      local attr = string.lower(string.match(part, "^%s*([^=%s]+)") or "")
      local replaced = (attr == "path" and rule["path"] ~= nil) or (attr == "domain" and rule["domain"] ~= nil)
        or (attr == "secure" and rule["secure"] ~= nil) or (attr == "samesite" and rule["sameSite"] ~= nil)
      if not replaced then
        parts[#parts + 1] = part
      end
    end
  end
  if rule["path"] ~= nil then parts[#parts + 1] = " Path=" .. rule["path"] end
  if rule["domain"] ~= nil then parts[#parts + 1] = " Domain=" .. rule["domain"] end
  if rule["secure"] == true then parts[#parts + 1] = " Secure" end
  if rule["sameSite"] ~= nil then parts[#parts + 1] = " SameSite=" .. rule["sameSite"] end
  return table.concat(parts, ";")
end

function envoy_on_response(response_handle)
  local context = response_handle:filterContext()
  local rules = {}
  for _, rule in ipairs(context["rules"] or {}) do
    rules[rule["name"]] = rule
  end
  local headers = response_handle:headers()
  local n = headers:getNumValues("set-cookie")
  if n == 0 then
    return
  end
  local cookies = {}
  for i = 0, n - 1 do
    cookies[#cookies + 1] = rewrite(headers:getAtIndex("set-cookie", i), rules)
  end
  headers:remove("set-cookie")
  for _, cookie in ipairs(cookies) do
    headers:add("set-cookie", cookie)
  end
end
`

// Rule rewrites the attributes of the cookie called Name; an empty string or a nil
// Secure leaves that attribute as the backend set it.
type Rule struct {
	Name     string
	Path     string
	Domain   string
	Secure   *bool
	SameSite string
}

// Context is the filter_context carrying rules to Script.
func Context(rules []Rule) (*structpb.Struct, error) {
	list := make([]any, 0, len(rules))
	for _, r := range rules {
		m := map[string]any{"name": r.Name}
		if r.Path != "" {
			m["path"] = r.Path
		}
		if r.Domain != "" {
			m["domain"] = r.Domain
		}
		if r.Secure != nil {
			m["secure"] = *r.Secure
		}
		if r.SameSite != "" {
			m["sameSite"] = r.SameSite
		}
		list = append(list, m)
	}
	return structpb.NewStruct(map[string]any{"rules": list})
}

// FromContext reads the rules of a filter_context that Context made.
func FromContext(s *structpb.Struct) ([]Rule, error) {
	v, ok := s.GetFields()["rules"]
	if !ok {
		return nil, errors.New(`filter_context has no "rules"`)
	}
	var out []Rule
	for i, item := range v.GetListValue().GetValues() {
		f := item.GetStructValue().GetFields()
		r := Rule{Name: f["name"].GetStringValue(), Path: f["path"].GetStringValue(), Domain: f["domain"].GetStringValue(), SameSite: f["sameSite"].GetStringValue()}
		if r.Name == "" {
			return nil, fmt.Errorf("filter_context rules[%d]: name is required", i)
		}
		if s, ok := f["secure"]; ok {
			b := s.GetBoolValue()
			r.Secure = &b
		}
		out = append(out, r)
	}
	return out, nil
}

// Rewrite is Script's rewrite of one Set-Cookie value.
func Rewrite(cookie string, rules []Rule) string {
	name, _, ok := strings.Cut(cookie, "=")
	if !ok {
		return cookie
	}
	name = strings.TrimSpace(name)
	var rule *Rule
	for i := range rules {
		if rules[i].Name == name {
			rule = &rules[i]
		}
	}
	if rule == nil || name == "" || strings.ContainsAny(name, "; \t") {
		return cookie
	}
	parts := strings.Split(cookie, ";")
	out := parts[:1]
	for _, p := range parts[1:] {
		if strings.TrimSpace(p) == "" {
			continue // Script's pattern skips empty parts
		}
		attr, _, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch strings.ToLower(strings.TrimSpace(attr)) {
		case "path":
			if rule.Path != "" {
				continue
			}
		case "domain":
			if rule.Domain != "" {
				continue
			}
		case "secure":
			if rule.Secure != nil {
				continue
			}
		case "samesite":
			if rule.SameSite != "" {
				continue
			}
		}
		out = append(out, p)
	}
	if rule.Path != "" {
		out = append(out, " Path="+rule.Path)
	}
	if rule.Domain != "" {
		out = append(out, " Domain="+rule.Domain)
	}
	if rule.Secure != nil && *rule.Secure {
		out = append(out, " Secure")
	}
	if rule.SameSite != "" {
		out = append(out, " SameSite="+rule.SameSite)
	}
	return strings.Join(out, ";")
}
