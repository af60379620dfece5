package problems

import (
	"errors"
	"testing"
)

func TestList(t *testing.T) {
	l := &List{Section: "http"}
	if l.Err() != nil {
		t.Fatal("an empty list is an error")
	}
	l.Add("tools[2]", "%s: the name is used twice", "issue")
	l.Add("hosts.api", "no HTTP tool calls this host")
	err := l.Err()
	if err == nil || err.Error() != "http.hosts.api: no HTTP tool calls this host\nhttp.tools[2]: issue: the name is used twice" {
		t.Fatalf("%v", err)
	}
	var each interface {
		EachProblem(func(path, message string))
	}
	if !errors.As(err, &each) {
		t.Fatal("the wiring cannot read the problems")
	}
	var paths []string
	each.EachProblem(func(path, _ string) { paths = append(paths, path) })
	if len(paths) != 2 || paths[0] != "hosts.api" || paths[1] != "tools[2]" {
		t.Errorf("paths %q", paths)
	}
}
