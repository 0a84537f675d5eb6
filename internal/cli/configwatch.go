package cli

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"slices"
	"time"
)

// configPollInterval is how often a running command looks at its --config file. The
// file is small, and a Kubernetes ConfigMap volume replaces it by swapping a symlink,
// which a watch on the file itself would miss: reading it again is the simple way.
const configPollInterval = 2 * time.Second

// watchConfigFile logs, until ctx ends, every change of the --config file at path
// after the settings it had at start (initial, as read): none applies until a restart.
// Contour reads its configuration file once at start too; a change that is only a
// restart away must not look applied, so each change is logged as needing one, with
// the keys it touches.
func watchConfigFile(ctx context.Context, fs *flag.FlagSet, path string, initial []setting, interval time.Duration, log *slog.Logger) {
	var last []byte // the content last looked at; nil before the first look
	var reported []string
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		data, err := os.ReadFile(path)
		if err != nil || (last != nil && bytes.Equal(data, last)) {
			continue
		}
		last = data
		now, err := readConfigFile(fs, path)
		if err != nil {
			log.Error("the --config file changed and is invalid: the settings read at start stay in force; fix it before the next restart", "file", path, "err", err)
			reported = nil
			continue
		}
		changed := changedKeys(initial, now)
		switch {
		case len(changed) > 0 && !slices.Equal(changed, reported):
			log.Warn("the --config file changed: restart portico to apply it (settings are read at start, as Contour reads its configuration file)", "file", path, "changed", changed)
		case len(changed) == 0 && reported != nil:
			log.Info("the --config file is back to the settings in force", "file", path)
		}
		reported = changed
	}
}

// changedKeys names the file's keys whose settings differ between a and b.
func changedKeys(a, b []setting) []string {
	index := func(ss []setting) map[string]setting {
		m := make(map[string]setting, len(ss))
		for _, s := range ss {
			m[s.flag] = s
		}
		return m
	}
	ma, mb := index(a), index(b)
	var out []string
	for f, s := range mb {
		if p, ok := ma[f]; !ok || p.value != s.value {
			out = append(out, s.key)
		}
	}
	for f, s := range ma {
		if _, ok := mb[f]; !ok {
			out = append(out, s.key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
