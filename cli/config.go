package cli

// --config FILE on train, debate, sft and score: a TOML or YAML file of flags (name =
// value, a list for a repeated flag), or a run's config.json, whose "command" holds the
// flags that made it. urfave/cli's altsrc applies the values, so the command line wins over
// the file; the file is read here, so that an unknown key is refused with its line.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	ucli "github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
	"gopkg.in/yaml.v3"

	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/run"
)

// configCommands take --config.
var configCommands = []string{"train", "debate", "sft", "score"}

// withConfigFiles gives configCommands --config: their flags become altsrc's, which a file
// can set, and their required flags are checked after the file is read (urfave/cli checks
// them before). Idempotent: App is built once per run, over the same commands.
func withConfigFiles(cmds []*ucli.Command) []*ucli.Command {
	for _, cmd := range cmds {
		if !slices.Contains(configCommands, cmd.Name) || slices.ContainsFunc(cmd.Flags, func(f ucli.Flag) bool { return slices.Contains(f.Names(), "config") }) {
			continue
		}
		var required []string
		for i, f := range cmd.Flags {
			if r, ok := f.(ucli.RequiredFlag); ok && r.IsRequired() {
				required = append(required, f.Names()[0])
			}
			cmd.Flags[i] = fileFlag(f)
		}
		cmd.Flags = append(cmd.Flags, &ucli.StringFlag{Name: "config", Usage: "read flags from `FILE`: TOML (.toml) or YAML (.yaml, .yml), " +
			"one flag per key (lr = 3e-6, agent = [\"a\", \"b\"] for a repeated flag), or a run's config.json (the flags that made the run, " +
			"--out its directory); flags on the command line win over the file, and an unknown key is refused with its line"})
		next := cmd.Before
		cmd.Before = func(c *ucli.Context) error {
			if err := applyConfig(c, required); err != nil {
				return err
			}
			noteCommand(c)
			if next != nil {
				return next(c)
			}
			return nil
		}
	}
	return cmds
}

// fileFlag is f as altsrc's flag of its type, no longer required (applyConfig checks).
func fileFlag(f ucli.Flag) ucli.Flag {
	if r := reflect.ValueOf(f).Elem().FieldByName("Required"); r.IsValid() {
		r.SetBool(false)
	}
	switch f := f.(type) {
	case *ucli.StringFlag:
		return altsrc.NewStringFlag(f)
	case *ucli.IntFlag:
		return altsrc.NewIntFlag(f)
	case *ucli.Float64Flag:
		return altsrc.NewFloat64Flag(f)
	case *ucli.BoolFlag:
		return altsrc.NewBoolFlag(f)
	case *ucli.StringSliceFlag:
		return altsrc.NewStringSliceFlag(f)
	case *ucli.Uint64Flag:
		return altsrc.NewUint64Flag(f)
	case *ucli.DurationFlag:
		return altsrc.NewDurationFlag(f)
	}
	return f
}

// applyConfig sets the flags --config's file gives and the command line does not, then
// checks the required flags.
func applyConfig(c *ucli.Context, required []string) error {
	if path := c.String("config"); path != "" {
		values, err := readConfig(path, c.Command)
		if err != nil {
			return fmt.Errorf("--config %w", err)
		}
		m := map[any]any{}
		for k, v := range values {
			m[k] = v
		}
		if err := altsrc.ApplyInputSourceValues(c, altsrc.NewMapInputSource(path, m), c.Command.Flags); err != nil {
			return fmt.Errorf("--config %s: %w", path, err)
		}
	}
	var missing []string
	for _, name := range required {
		if !c.IsSet(name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("required flags not set: --%s (on the command line or in --config)", strings.Join(missing, ", --"))
	}
	return nil
}

// readConfig reads a config file into flag values of cmd, each of its flag's type.
func readConfig(path string, cmd *ucli.Command) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	lines := map[string]int{}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".toml":
		raw, err = readTOML(b, cmd)
	case ".yaml", ".yml", ".json": // JSON is YAML, which gives lines
		raw, lines, err = readYAML(b, ext == ".json", cmd)
	default:
		return nil, fmt.Errorf("%s: want a .toml, .yaml, .yml or .json file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	values := map[string]any{}
	for k, v := range raw {
		f := flagNamed(cmd, k)
		if v, err = flagValue(f, v); err != nil {
			if lines[k] > 0 {
				return nil, fmt.Errorf("%s: line %d: %s: %w", path, lines[k], k, err)
			}
			return nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		values[f.Names()[0]] = v
	}
	if _, given := values["out"]; strings.EqualFold(filepath.Ext(path), ".json") && !given && flagNamed(cmd, "out") != nil {
		values["out"] = filepath.Dir(path) // a run's own directory
	}
	return values, nil
}

// fileKeys are the keys a file may set: every name of cmd's flags that altsrc applies.
func fileKeys(cmd *ucli.Command) []string {
	var keys []string
	for _, f := range cmd.Flags {
		if _, ok := f.(altsrc.FlagInputSourceExtension); ok {
			keys = append(keys, f.Names()...)
		}
	}
	return keys
}

func flagNamed(cmd *ucli.Command, name string) ucli.Flag {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// readTOML decodes a TOML file into a struct with one field per flag name, so that
// go-toml refuses an unknown key with its line.
func readTOML(b []byte, cmd *ucli.Command) (map[string]any, error) {
	keys := fileKeys(cmd)
	fields := make([]reflect.StructField, len(keys))
	for i, k := range keys {
		fields[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: reflect.TypeFor[any](), Tag: reflect.StructTag(`toml:"` + k + `"`)}
	}
	v := reflect.New(reflect.StructOf(fields))
	if err := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields().Decode(v.Interface()); err != nil {
		return nil, experiment.TOMLError(err)
	}
	out := map[string]any{}
	for i, k := range keys {
		if x := v.Elem().Field(i).Interface(); x != nil {
			out[k] = x
		}
	}
	return out, nil
}

// readYAML decodes a YAML (or JSON) mapping of flags with each key's line. A run's
// config.json gives its "command".
func readYAML(b []byte, runConfig bool, cmd *ucli.Command) (map[string]any, map[string]int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, errors.New("want a mapping of flag names to values")
	}
	top := doc.Content[0]
	if runConfig {
		command := mappingValue(top, "command")
		if command == nil {
			return nil, nil, errors.New(`no "command": a run's config.json records the flags that made it since umad had --config; ` +
				"an older one holds only the resolved settings, which are not flags: give them as flags or in a TOML file")
		}
		top = command
	}
	keys := fileKeys(cmd)
	out, lines := map[string]any{}, map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if !slices.Contains(keys, k.Value) {
			return nil, nil, fmt.Errorf("line %d: unknown key %s: umad %s has no flag --%s", k.Line, k.Value, cmd.Name, k.Value)
		}
		var x any
		if err := v.Decode(&x); err != nil {
			return nil, nil, fmt.Errorf("line %d: %s: %w", k.Line, k.Value, err)
		}
		out[k.Value], lines[k.Value] = x, k.Line
	}
	return out, lines, nil
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.MappingNode {
			return m.Content[i+1]
		}
	}
	return nil
}

// flagValue is a decoded value as altsrc wants it for f: int for an int, float64 for a
// float (a whole number too), a list for a repeated flag (one value too), a string for a
// string flag (a number written bare too).
func flagValue(f ucli.Flag, v any) (any, error) {
	isInt := func() (int64, bool) {
		switch n := v.(type) {
		case int:
			return int64(n), true
		case int64:
			return n, true
		case uint64:
			return int64(n), n <= 1<<62
		}
		return 0, false
	}
	switch f.(type) {
	case *altsrc.IntFlag:
		if n, ok := isInt(); ok {
			return int(n), nil
		}
		return nil, errors.New("want a whole number")
	case *altsrc.Uint64Flag:
		if n, ok := isInt(); ok && n >= 0 {
			return uint64(n), nil
		}
		return nil, errors.New("want a whole number, not negative")
	case *altsrc.Float64Flag:
		if n, ok := isInt(); ok {
			return float64(n), nil
		}
		if x, ok := v.(float64); ok {
			return x, nil
		}
		return nil, errors.New("want a number")
	case *altsrc.BoolFlag:
		if _, ok := v.(bool); !ok {
			return nil, errors.New("want true or false")
		}
	case *altsrc.StringSliceFlag:
		list, ok := v.([]any)
		if !ok {
			list = []any{v}
		}
		for i, x := range list {
			if list[i], ok = scalarText(x); !ok {
				return nil, errors.New("want a value or a list of values")
			}
		}
		return list, nil
	case *altsrc.StringFlag, *altsrc.DurationFlag:
		if s, ok := scalarText(v); ok {
			return s, nil
		}
		return nil, errors.New("want one value, not a list or table")
	}
	return v, nil
}

// scalarText is a string, number or bool as the command line would spell it.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int, int64, uint64, bool:
		return fmt.Sprint(x), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

// commandKey holds, in a command's context, the flags it was given (commandFlags).
type commandKey struct{}

// commandFlags are the flags set on the command line or by --config, as a run's
// "command" records them: not run.NotRecorded, nor those environment variables can set (the
// machine's, such as the plugin's path).
func commandFlags(c *ucli.Context) map[string]any {
	out := map[string]any{}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if slices.Contains(run.NotRecorded, name) || !c.IsSet(name) {
			continue
		}
		if e, ok := f.(interface{ GetEnvVars() []string }); ok && len(e.GetEnvVars()) > 0 {
			continue
		}
		switch f.(type) {
		case *altsrc.StringSliceFlag:
			out[name] = c.StringSlice(name)
		case *altsrc.BoolFlag:
			out[name] = c.Bool(name)
		case *altsrc.IntFlag:
			out[name] = c.Int(name)
		case *altsrc.Uint64Flag:
			out[name] = c.Uint64(name)
		case *altsrc.Float64Flag:
			out[name] = c.Float64(name)
		case *altsrc.DurationFlag:
			out[name] = c.Duration(name).String()
		default:
			out[name] = c.String(name)
		}
	}
	return out
}

// noteCommand keeps the flags set now as the command a run records (recordCommand).
func noteCommand(c *ucli.Context) {
	c.Context = context.WithValue(c.Context, commandKey{}, commandFlags(c))
}

// recordCommand makes save also add the command's flags to the run's config.json as
// "command" (run.RecordCommand).
func recordCommand(c *ucli.Context, dir string, save func() error) func() error {
	return run.RecordCommand(dir, notedCommand(c), save)
}

// notedCommand is the command's flags as noteCommand kept them; nil when none were kept.
func notedCommand(c *ucli.Context) map[string]any {
	flags, _ := c.Context.Value(commandKey{}).(map[string]any)
	return flags
}
