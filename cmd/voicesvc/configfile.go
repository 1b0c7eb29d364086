package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"voicesvc/engine/upstream"
)

// maxConfigFile bounds the configuration file read at start: a file of
// thousands of voices is still far below it.
const maxConfigFile = 4 << 20

// builtinEngines are the names an upstream engine may not take.
var builtinEngines = []string{"espeak", "espeak-ng", "reference"}

// configKeys are the keys an upstream engine's entry may have, and those of
// one of its voices: a misspelt key is an error at start, not a setting
// silently ignored.
var (
	engineKeys = keySet("name", "type", "urls", "api_key", "api_key_env", "model", "sample_rate",
		"max_concurrency", "timeout", "sentence_timeout", "max_audio_seconds_per_char", "max_sentence_bytes",
		"discover", "voices")
	voiceKeys = keySet("alias", "voice", "name", "language", "labels")
)

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// configError is a mistake in the file, with the line it is on.
func configError(path string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", path, n.Line, fmt.Sprintf(format, args...))
}

// applyConfigFile reads the YAML file at path into fs and c. Each top-level
// key is a flag's name, with "_" or "-" ("engine_workers"), and sets that
// flag through its own parser unless the command line or the environment
// set it (skip); "engines" lists the upstream engines. Every error names the
// file's line and the reason.
func applyConfigFile(path string, fs *flag.FlagSet, skip map[string]bool, c *serveConfig) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--config: %v", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return fmt.Errorf("--config %s: %v", path, err)
	}
	if len(buf) > maxConfigFile {
		return fmt.Errorf("--config %s: larger than %d bytes", path, maxConfigFile)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(buf, &doc); err != nil {
		return fmt.Errorf("%s: %v", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return configError(path, root, "want a mapping of settings at the top")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := strings.ReplaceAll(k.Value, "_", "-")
		if seen[key] {
			return configError(path, k, "%s is set twice", k.Value)
		}
		seen[key] = true
		if key == "engines" {
			engines, err := parseEngines(path, v)
			if err != nil {
				return err
			}
			c.Engines = engines
			continue
		}
		fl := fs.Lookup(key)
		if fl == nil || key == "config" {
			return configError(path, k, "unknown setting %q", k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return configError(path, v, "%s: want a single value", k.Value)
		}
		if skip[key] {
			continue // the command line or the environment wins
		}
		if err := fs.Set(key, v.Value); err != nil {
			return configError(path, v, "%s: %v", k.Value, err)
		}
		if c.fileLines == nil {
			c.fileLines = map[string]string{}
		}
		c.fileLines[key] = fmt.Sprintf("%s:%d: %s", path, v.Line, k.Value)
	}
	return nil
}

// parseEngines decodes and validates the engines list: unknown keys, a
// value of the wrong type, a reserved or repeated name and whatever
// upstream.Config.Validate refuses, each at its line.
func parseEngines(path string, list *yaml.Node) ([]upstream.Config, error) {
	if list.Kind != yaml.SequenceNode {
		return nil, configError(path, list, "engines: want a list")
	}
	var out []upstream.Config
	names := map[string]bool{}
	for _, n := range list.Content {
		if err := checkKeys(path, n, engineKeys, "engine"); err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value != "voices" {
				continue
			}
			vs := n.Content[i+1]
			if vs.Kind != yaml.SequenceNode {
				return nil, configError(path, vs, "voices: want a list")
			}
			for _, v := range vs.Content {
				if err := checkKeys(path, v, voiceKeys, "voice"); err != nil {
					return nil, err
				}
			}
		}
		var c upstream.Config
		if err := n.Decode(&c); err != nil {
			return nil, configError(path, n, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		for _, b := range builtinEngines {
			if c.Name == b {
				return nil, configError(path, n, "engine name %q is the built-in engine's", c.Name)
			}
		}
		if names[c.Name] {
			return nil, configError(path, n, "engine name %q is used twice", c.Name)
		}
		names[c.Name] = true
		if err := c.Validate(); err != nil {
			return nil, configError(path, n, "%v", err)
		}
		out = append(out, c)
	}
	return out, nil
}

func checkKeys(path string, n *yaml.Node, allowed map[string]bool, what string) error {
	if n.Kind != yaml.MappingNode {
		return configError(path, n, "%s: want a mapping of keys", what)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !allowed[k.Value] {
			return configError(path, k, "%s: unknown key %q", what, k.Value)
		}
	}
	return nil
}
