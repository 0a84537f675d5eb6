package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/echo"
)

// StartEcho starts a `portico echo` backend with cfg (Listen defaults to an ephemeral
// loopback port), stops it when the test ends, and returns its address.
func StartEcho(t testing.TB, cfg echo.Config) string {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s := echo.New(cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s.Addr()
}
