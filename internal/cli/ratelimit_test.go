package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// The rate limit flags refuse, before anything runs, what cannot work, saying why.
func TestRateLimitFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for no error
	}{
		{nil, ""},
		{[]string{"--rate-limit-service", "127.0.0.1:8081"}, ""},
		{[]string{"--rate-limit-service", "127.0.0.1"}, "missing port"},
		{[]string{"--rate-limit-service", "127.0.0.1:8081", "--rate-limit-domain", ""}, "needs a domain"},
		{[]string{"--rate-limit-default-global-policy", "{descriptors: [{entries: [{remoteAddress: {}}]}]}"}, "needs --rate-limit-service"},
		{[]string{"--rate-limit-service", "127.0.0.1:8081", "--rate-limit-default-global-policy", "{descriptors: [{entries: [{remoteAddress: {}}]}]}"}, ""},
		{[]string{"--rate-limit-service", "127.0.0.1:8081", "--rate-limit-default-global-policy", "{descriptors: [{entries: [{genericKey: {key: k}}]}]}"}, "default global rate limit policy.descriptors[0].entries[0].genericKey.value is required"},
		{[]string{"--rate-limit-service", "127.0.0.1:8081", "--rate-limit-default-global-policy", "{descriptor: []}"}, `unknown field "descriptor"`},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		get := rateLimitFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := get()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		case tc.want == "" && len(tc.args) > 0 && cfg.service == nil:
			t.Errorf("%v: no service configured", tc.args)
		}
	}
}
