// Package output writes what a berth command shows in the formats kubectl
// users expect from -o: a table for people, json or yaml for scripts.
package output

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Format is the value of -o/--output.
type Format string

// The formats every command that takes -o accepts.
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// Bind adds -o/--output to fs, defaulting to a table.
func (f *Format) Bind(fs *pflag.FlagSet) {
	*f = Table
	fs.StringVarP((*string)(f), "output", "o", string(Table), "output format: table, json or yaml")
}

// Check refuses a format that is not table, json or yaml.
func (f Format) Check() error {
	switch f {
	case Table, JSON, YAML:
		return nil
	}
	return fmt.Errorf("--output must be table, json or yaml, not %q", string(f))
}

// Write writes v as JSON or YAML, or calls table for the table format.
func (f Format) Write(w io.Writer, v any, table func(io.Writer)) error {
	switch f {
	case JSON:
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(data))
		return err
	case YAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case Table:
		table(w)
		return nil
	}
	return f.Check()
}
