package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// A --config file is one YAML mapping whose keys are either the command's flag names
// ("xds-addr: 0.0.0.0:8001") or the keys of Contour's configuration file ("timeouts:
// {stream-idle-timeout: 5m}", see contourconfig.go), in any mix: a key that is a flag
// name is one. Each key sets flags; the command line wins over the file, the file over
// the defaults. Two keys of the file that set the same flag are an error, as is a key
// that is neither form: both name the line.

// setting is one flag value a key of the file gives.
type setting struct {
	flag, value string
	key         string // the file's key that gives it, such as "timeouts.stream-idle-timeout"
	line        int
	pair        *pairSpec // set when another key may complete the value (pair)
}

// readConfigFile returns the settings of the file at path (see above).
func readConfigFile(fs *flag.FlagSet, path string) ([]setting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: line %d: the file must be a mapping of settings (flag names or Contour's configuration keys)", path, root.Line)
	}
	var out []setting
	if isContourConfiguration(root) {
		if err := contourConfigurationKeys.apply("", nil, root, &out); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return out, nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		var err error
		if fs.Lookup(k.Value) != nil {
			err = flagKey(k, v, &out)
		} else if rule, ok := contourKeys[k.Value]; ok {
			// One list for all keys: a rule may complete the setting of another
			// (envoyService).
			err = rule.apply(k.Value, k, v, &out)
		} else {
			err = fmt.Errorf("line %d: unknown setting %q (settings are the command's flag names, such as %q, or the keys of Contour's configuration file: see docs/contour-config.md)", k.Line, k.Value, "xds-addr")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return out, nil
}

// flagKey is the setting of a key that names a flag: scalars as written, sequences
// comma-separated, mappings as JSON (the flags that take YAML or JSON).
func flagKey(k, v *yaml.Node, out *[]setting) error {
	if k.Value == "config" {
		return fmt.Errorf("line %d: config: a --config file cannot name another", k.Line)
	}
	val, err := flagValue(v)
	if err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err)
	}
	*out = append(*out, setting{flag: k.Value, value: val, key: k.Value, line: k.Line})
	return nil
}

func flagValue(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return v.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, len(v.Content))
		for i, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return "", errors.New("a list of plain values is expected")
			}
			parts[i] = e.Value
		}
		return strings.Join(parts, ","), nil
	case yaml.MappingNode:
		var m any
		if err := v.Decode(&m); err != nil {
			return "", err
		}
		b, err := json.Marshal(m)
		return string(b), err
	}
	return "", fmt.Errorf("unexpected YAML %s", kindName(v.Kind))
}

// applyConfigFile sets, from the --config file at path, every flag of fs that the
// command line did not set, and returns the settings it read (for the reload watch).
func applyConfigFile(fs *flag.FlagSet, path string) ([]setting, error) {
	settings, err := readConfigFile(fs, path)
	if err != nil {
		return nil, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	byFlag := map[string]setting{}
	for _, s := range settings {
		if prev, ok := byFlag[s.flag]; ok {
			return nil, fmt.Errorf("%s: line %d: %s sets --%s, which %s (line %d) sets too: keep one", path, s.line, s.key, s.flag, prev.key, prev.line)
		}
		byFlag[s.flag] = s
		if fs.Lookup(s.flag) == nil {
			return nil, fmt.Errorf("%s: line %d: %s sets --%s, which %s does not have: remove it from the file given to this command", path, s.line, s.key, s.flag, fs.Name())
		}
		if explicit[s.flag] {
			continue
		}
		if err := fs.Set(s.flag, s.value); err != nil {
			return nil, fmt.Errorf("%s: line %d: %s: %w", path, s.line, s.key, err)
		}
	}
	return settings, nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "value"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}
