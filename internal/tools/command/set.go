package command

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-playground/validator/v10"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// Set is the command tools of one configuration. Its commands run through
// the launcher it was given, which toold closes.
type Set struct {
	cfg      Config
	log      *zap.Logger
	l        *launch.Launcher
	tools    []tools.Tool
	describe []string
}

// New validates cfg and builds its tools: every problem (a template that
// does not parse, a program that does not exist, a working directory
// outside the workspace, a containment mode this machine cannot provide, a
// duplicate name) is reported, each naming its tool. l is the launcher
// built from cfg.Config.
func New(cfg Config, l *launch.Launcher, log *zap.Logger) (*Set, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := validateConfig(cfg); err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg, log: log, l: l}
	var errs []error
	names := map[string]bool{}
	add := func(t tools.Tool, err error, name string) {
		if err == nil && names[name] {
			err = errors.New("the name is used twice")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("command tool %q: %w", name, err))
			return
		}
		names[name] = true
		s.tools = append(s.tools, t)
		s.describe = append(s.describe, name+": "+t.Spec().Containment)
	}
	for _, tc := range cfg.Tools {
		t, err := s.declared(tc)
		add(t, err, tc.Name)
	}
	if cfg.ExecuteCommand.Enabled {
		t, err := s.executeTool(cfg.ExecuteCommand)
		add(t, err, ExecuteCommandName)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, line := range s.describe {
		log.Debug("command tool", zap.String("tool", line))
	}
	return s, nil
}

// Tools returns the declarative tools in configuration order, then
// execute_command when it is enabled.
func (s *Set) Tools() []tools.Tool { return slices.Clone(s.tools) }

// Describe returns one line per tool for the start-up log: its name and the
// containment chosen, with why (for auto) and what it does not isolate.
func (s *Set) Describe() []string { return slices.Clone(s.describe) }

// validateConfig applies the struct tags, as toold's config loader does,
// so New alone refuses what the loader would.
func validateConfig(cfg Config) error {
	v := validator.New(validator.WithRequiredStructEnabled())
	// A field embedded inline (launch.Config, launch.Sandbox) has no key
	// of its own: it is named so that its step can be dropped.
	const inline = "\x00inline"
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		if name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" || opts != "inline" {
			return name
		}
		return inline
	})
	_ = v.RegisterValidation(tools.ResultBudgetTag, tools.ResultBudgetRule)
	var verrs validator.ValidationErrors
	if err := v.Struct(cfg); errors.As(err, &verrs) {
		msgs := make([]string, len(verrs))
		for i, fe := range verrs {
			ns := strings.ReplaceAll(fe.Namespace(), "."+inline, "")
			_, ns, _ = strings.Cut(ns, ".")
			msgs[i] = fmt.Sprintf("commands.%s: fails the %q rule", ns, fe.Tag())
			if p := fe.Param(); p != "" {
				msgs[i] = fmt.Sprintf("commands.%s: fails the %q rule (%s)", ns, fe.Tag(), p)
			}
		}
		return errors.New(strings.Join(msgs, "\n"))
	} else if err != nil {
		return fmt.Errorf("commands: %w", err)
	}
	return nil
}
