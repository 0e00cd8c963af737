package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Usage errors in the client's own words. Cobra and pflag describe a bad
// command line in their internals' terms ("accepts 1 arg(s), received 0",
// "strconv.ParseFloat: parsing "ten": invalid syntax"); these say what was
// wrong and what is accepted instead. Each is a *usageError (exit 2) that
// names its command, so the help hint points at that command's help.

// flagExample is the pflag annotation holding an example value of a flag,
// used in the message for a value of the wrong type.
const flagExample = "svc_example"

// setExample records an example value for flag name of cmd.
func setExample(cmd *cobra.Command, name, example string) {
	_ = cmd.Flags().SetAnnotation(name, flagExample, []string{example})
}

// flagError turns pflag's parse errors into sentences.
func flagError(cmd *cobra.Command, err error) error {
	var inv *pflag.InvalidValueError
	var req *pflag.ValueRequiredError
	var unknown *pflag.NotExistError
	msg := err.Error()
	switch {
	case errors.As(err, &inv):
		f := inv.GetFlag()
		eg := ""
		if ex := f.Annotations[flagExample]; len(ex) > 0 {
			eg = ", e.g. " + ex[0]
		}
		what := "a valid " + f.Value.Type()
		switch f.Value.Type() {
		case "float64", "float32":
			what = "a number"
		case "int", "int64", "int32", "uint", "uint64":
			what = "a whole number"
		case "duration":
			what, eg = "a duration", " such as 30s, 2m or 1h30m"
		case "bool":
			what, eg = "true or false", ", e.g. --"+f.Name+"=false"
		}
		msg = fmt.Sprintf("--%s must be %s%s (got %q)", f.Name, what, eg, inv.GetValue())
	case errors.As(err, &req):
		msg = fmt.Sprintf("--%s needs a value", req.GetSpecifiedName())
		if f := req.GetFlag(); f != nil && f.Usage != "" {
			msg += ": " + f.Usage
		}
	case errors.As(err, &unknown):
		msg = fmt.Sprintf("unknown flag --%s for %s", unknown.GetSpecifiedName(), cmd.CommandPath())
		if unknown.GetSpecifiedShortnames() != "" {
			msg = fmt.Sprintf("unknown flag -%s for %s", unknown.GetSpecifiedName(), cmd.CommandPath())
		}
	}
	return &usageError{msg: msg, cmd: cmd.CommandPath()}
}

// noArgs refuses arguments to a command that takes none; on a command with
// subcommands an argument is an unknown subcommand, listed with the valid
// ones (and cobra's "did you mean" suggestion).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if !cmd.HasAvailableSubCommands() {
		return &usageError{msg: fmt.Sprintf("%s takes no arguments (got %q)", cmd.CommandPath(), args[0]), cmd: cmd.CommandPath()}
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q for %s; commands: %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default for its suggestions
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return &usageError{msg: msg, cmd: cmd.CommandPath()}
}

// oneOf accepts exactly one argument from choices; what names it ("test
// event", "setting").
func oneOf(what string, choices ...string) cobra.PositionalArgs {
	list := orList(choices)
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return &usageError{msg: fmt.Sprintf("%s needs a %s: %s", cmd.CommandPath(), what, list), cmd: cmd.CommandPath()}
		case !slices.Contains(choices, args[0]):
			return &usageError{msg: fmt.Sprintf("unknown %s %q: choose %s", what, args[0], list), cmd: cmd.CommandPath()}
		case len(args) > 1:
			return &usageError{msg: fmt.Sprintf("%s takes one %s, got %d arguments (%s)", cmd.CommandPath(), what, len(args), strings.Join(args, " ")), cmd: cmd.CommandPath()}
		}
		return nil
	}
}

// orList renders choices as "a, b, c or d".
func orList(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}
