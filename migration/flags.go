package migration

import (
	"flag"
	"fmt"
)

// AddFlags adds the old binary's flags that fs does not define: one with Use sets that
// flag of fs, any other is accepted and ignored. used lists, after parsing, a warning
// for each one given, for the caller to log once its logger is set up.
func (m *FromOCR) AddFlags(fs *flag.FlagSet) (used func() []string) {
	var warnings []string
	if m == nil {
		return func() []string { return nil }
	}
	for _, f := range m.Flags {
		if fs.Lookup(f.Name) != nil {
			continue // this binary takes it under the same name
		}
		fs.Var(&oldFlag{Flag: f, fs: fs, warnings: &warnings}, f.Name, oldFlagUsage(f))
	}
	return func() []string { return warnings }
}

func oldFlagUsage(f Flag) string {
	if f.Use != "" {
		return fmt.Sprintf("flag of the provider's previous binary: sets --%s", f.Use)
	}
	return "flag of the provider's previous binary: accepted and ignored"
}

// oldFlag is one old flag's value.
type oldFlag struct {
	Flag
	fs       *flag.FlagSet
	warnings *[]string
}

func (o *oldFlag) String() string { return "" }

// IsBoolFlag lets a flag that took no value be given without one.
func (o *oldFlag) IsBoolFlag() bool { return o.Bool }

func (o *oldFlag) Set(v string) error {
	if o.Use == "" {
		*o.warnings = append(*o.warnings, fmt.Sprintf("--%s is a flag of the provider's previous binary; ignored", o.Name))
		return nil
	}
	if err := o.fs.Set(o.Use, v); err != nil {
		return fmt.Errorf("--%s (sets --%s): %w", o.Name, o.Use, err)
	}
	*o.warnings = append(*o.warnings, fmt.Sprintf("--%s is a flag of the provider's previous binary; it set --%s", o.Name, o.Use))
	return nil
}
