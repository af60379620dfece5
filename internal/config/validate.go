package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/upstream"
)

// Validate checks the configuration as toold will run it (after flags are
// applied): field rules, limits that can work together, and that toold
// without keys listens on loopback only.
func (c *Config) Validate() error {
	probs := &Error{}
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(yamlName)
	_ = v.RegisterValidation("listen_addr", func(fl validator.FieldLevel) bool {
		_, port, err := net.SplitHostPort(fl.Field().String())
		n, perr := strconv.Atoi(port)
		return err == nil && perr == nil && n >= 0 && n <= 65535
	})
	_ = v.RegisterValidation("tool_name", func(fl validator.FieldLevel) bool {
		return tools.NamePattern.MatchString(fl.Field().String())
	})
	_ = v.RegisterValidation(tools.ResultBudgetTag, tools.ResultBudgetRule)
	_ = v.RegisterValidation("role", func(fl validator.FieldLevel) bool {
		return slices.Contains(auth.Roles, auth.Role(fl.Field().String()))
	})
	var verrs validator.ValidationErrors
	if err := v.Struct(c); errors.As(err, &verrs) {
		for _, fe := range verrs {
			probs.add(namespacePath(fe.Namespace()), "%s", ruleMessage(fe))
		}
	}
	for name, l := range c.Categories {
		cat := tools.Category(name)
		if !cat.Valid() {
			continue // reported by the field rules
		}
		merged := l.Limits().Merge(tools.DefaultLimits(cat))
		if err := merged.Validate(); err != nil {
			probs.add("categories."+name, "%v", err)
		}
	}
	for name, t := range c.Tools {
		if err := t.Limits.Check(); err != nil {
			probs.add("tools."+name+".limits", "%v", err)
		}
	}
	var se *sanitize.ConfigError
	if err := c.Sanitize.Validate(); errors.As(err, &se) {
		for _, p := range se.Problems {
			probs.add("sanitize."+p.Path, "%s", p.Message)
		}
	} else if err != nil {
		probs.add("sanitize", "%v", err)
	}
	for i, srv := range c.MCP.Servers {
		if err := srv.Check(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				probs.add(fmt.Sprintf("mcp.servers[%d]", i), "%s", line)
			}
		}
		c.checkServerLimits(probs, i, srv)
	}
	probs.addSection("consult", c.Consult.Check())
	probs.addSection("auth.oauth", c.Auth.OAuth.Check())
	c.State.check(probs)
	c.checkToolsets(probs)
	if sc := c.Server; sc.BodyBudgetBytes > 0 && sc.BodyBudgetBytes < sc.MaxBodyBytes {
		probs.add("server.body_budget_bytes", "%d is below server.max_body_bytes (%d): a body of the largest size allowed could never be read",
			sc.BodyBudgetBytes, sc.MaxBodyBytes)
	}
	if k := c.MCP.StdioKey; k != "" && !slices.ContainsFunc(c.Auth.Keys, func(key Key) bool { return key.Name == k }) {
		probs.add("mcp.stdio_key", "%q names no key of auth.keys; name the key whose tools and roles a -stdio caller has", k)
	}
	if !c.Auth.enabled() && !c.InsecureNoAuth && !Loopback(c.Listen) {
		probs.add("listen", "%q is not a loopback address and no auth keys or token issuers are configured; "+
			"add auth.keys or auth.oauth, listen on 127.0.0.1, or pass -insecure-no-auth", c.Listen)
	}
	return probs.orNil()
}

// checkServerLimits resolves an upstream server's limits as the registry
// will resolve its tools', over categories.mcp. Its tools are registered
// while toold serves, after start-up checked everything else: limits that
// cannot work are refused here, not tool by tool once the server is up.
func (c *Config) checkServerLimits(probs *Error, i int, srv upstream.Config) {
	cat := tools.MCP
	reg := registry.Options{Defaults: map[tools.Category]tools.Limits{cat: c.Categories[string(cat)].Limits()}}
	path := fmt.Sprintf("mcp.servers[%d]", i)
	for _, name := range slices.Sorted(maps.Keys(srv.ToolLimits)) {
		if _, err := reg.ResolveLimits(cat, srv.ToolLimits[name].Limits().Merge(srv.Limits.Limits())); err != nil {
			probs.add(path, "tool_limits.%s: %v", name, err)
		}
	}
	if _, err := reg.ResolveLimits(cat, srv.Limits.Limits()); err != nil {
		probs.add(path, "limits: %v", err)
	}
}

// SectionError is the configuration error of a section whose own
// package checked it (http, consult): each problem at its path in the
// section when err lists them, else the whole error at the section.
func SectionError(section string, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{}
	e.addSection(section, err)
	return e
}

// addSection adds a section's error: each problem at its path in the
// section when the error lists them, else the whole error at the section,
// so that no error is lost.
func (e *Error) addSection(section string, err error) {
	if err == nil {
		return
	}
	var list interface {
		EachProblem(func(path, message string))
	}
	if !errors.As(err, &list) {
		e.add(section, "%v", err)
		return
	}
	list.EachProblem(func(path, message string) {
		e.add(section+"."+path, "%s", message)
	})
}

func (a AuthConfig) enabled() bool { return len(a.Keys) > 0 || len(a.OAuth) > 0 }

// Loopback reports whether a listen address binds loopback only. An empty
// host (":8080") binds every interface, so it is not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// inlineName names, for the validator, a field embedded with
// `yaml:",inline"`: its keys are its parent's, so it is no step of a path
// (namespacePath drops it). No YAML key can be it.
const inlineName = "\x00inline"

// yamlName is a field's name in validator's namespaces: its YAML key.
func yamlName(f reflect.StructField) string {
	name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" && opts == "inline" {
		return inlineName
	}
	return name
}

// namespacePath turns validator's "Config.tools[read_file].limits.timeout"
// into "tools.read_file.limits.timeout".
func namespacePath(ns string) string {
	_, rest, _ := strings.Cut(ns, ".")
	rest = strings.ReplaceAll(rest, "."+inlineName, "")
	rest = strings.ReplaceAll(rest, "[", ".")
	rest = strings.ReplaceAll(rest, "]", "")
	return rest
}

func ruleMessage(fe validator.FieldError) string {
	p := fe.Param()
	switch fe.Tag() {
	case "required":
		return "is required"
	case "listen_addr":
		return fmt.Sprintf("%q is not a host:port address", fe.Value())
	case "oneof":
		return fmt.Sprintf("%q is not one of: %s", fe.Value(), strings.Join(strings.Fields(p), ", "))
	case "gte", "min":
		return "must be at least " + p
	case "lte", "max":
		return "must be at most " + p
	case "len":
		return "must be " + p + " characters long"
	case "hexadecimal":
		return "must be hexadecimal (toold -hash-key prints a key's SHA-256)"
	case "url":
		return fmt.Sprintf("%q is not a URL such as https://app.example", fe.Value())
	case "role":
		return fmt.Sprintf("%q is not one of: %s", fe.Value(), roleList())
	case tools.ResultBudgetTag:
		return fmt.Sprintf("must be 0 (no budget) or at least %d bytes, room for a head and its markers", tools.MinResultBytes)
	case "tool_name":
		return fmt.Sprintf("%q is not a valid tool name (%s)", fe.Value(), tools.NamePattern)
	}
	return fmt.Sprintf("fails the %q rule", fe.Tag())
}

// roleList is every role, as the "role" rule's message names them.
func roleList() string {
	names := make([]string, len(auth.Roles))
	for i, r := range auth.Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}
