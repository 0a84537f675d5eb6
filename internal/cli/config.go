package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// applyConfigFile sets, from a YAML file whose keys are flag names, every flag of fs
// that the command line did not set: the command line wins over the file, the file over
// the defaults. Lists may be YAML sequences; they become comma-separated values.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var values map[string]any
	if err := yaml.UnmarshalStrict(data, &values); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	for key, v := range values {
		if fs.Lookup(key) == nil {
			return fmt.Errorf("%s: unknown setting %q (settings are the command's flag names, e.g. %q)", path, key, "xds-addr")
		}
		if explicit[key] || key == "config" {
			continue
		}
		if err := fs.Set(key, configValue(v)); err != nil {
			return fmt.Errorf("%s: %s: %w", path, key, err)
		}
	}
	return nil
}

func configValue(v any) string {
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, e := range list {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}
