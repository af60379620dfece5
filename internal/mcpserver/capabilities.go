package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What toold declares beyond the SDK's types. The SDK's
// ServerCapabilities has no tasks, and its Tool no execution (both MCP
// 2025-11-25), so the middleware hands the SDK results that embed the
// SDK's own (and so are its Result) and add those members when encoded.

// tasksProtocol is the first protocol version with tasks.
const tasksProtocol = "2025-11-25"

// tasksCapability is what toold serves of tasks.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// declaresTasks reports whether an initialize is answered with the tasks
// capability: the client speaks 2025-11-25 (or later, before the tasks
// moved to an extension) and declared tasks, and toold keeps executions.
func (s *Server) declaresTasks(ctx context.Context) bool {
	p := peerOf(ctx)
	if p == nil || !s.opts.Executions.Durable() {
		return false
	}
	c := p.caps()
	return c.Tasks && c.Version >= tasksProtocol && c.Version < multiRoundTrip
}

// withTasks is an initialize result that declares tasks.
type withTasks struct{ *mcp.InitializeResult }

func (r withTasks) MarshalJSON() ([]byte, error) {
	return addMembers(r.InitializeResult, func(m map[string]json.RawMessage) error {
		return setMember(m, "capabilities", func(caps map[string]json.RawMessage) error {
			caps["tasks"] = tasksCapability
			return nil
		})
	})
}

// withExecution is a tools/list result whose tools say how they may be
// called (execution.taskSupport), by MCP name.
type withExecution struct {
	*mcp.ListToolsResult
	execution map[string]json.RawMessage
}

func (r withExecution) MarshalJSON() ([]byte, error) {
	return addMembers(r.ListToolsResult, func(m map[string]json.RawMessage) error {
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(m["tools"], &list); err != nil {
			return err
		}
		for _, t := range list {
			var name string
			if json.Unmarshal(t["name"], &name) == nil && r.execution[name] != nil {
				t["execution"] = r.execution[name]
			}
		}
		b, err := json.Marshal(list)
		m["tools"] = b
		return err
	})
}

// executionOf is what the listed tools say of their execution; nil when
// none says anything.
func (s *Server) executionOf(list []*mcp.Tool) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for _, t := range list {
		if e := s.entry(t.Name); e != nil {
			if x := e.MCP().Execution; x != nil {
				if out == nil {
					out = map[string]json.RawMessage{}
				}
				out[t.Name], _ = json.Marshal(x)
			}
		}
	}
	return out
}

// addMembers encodes v as the SDK does, then lets edit change its members.
func addMembers(v any, edit func(map[string]json.RawMessage) error) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if err := edit(m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// setMember edits the object member key of m (created when absent).
func setMember(m map[string]json.RawMessage, key string, edit func(map[string]json.RawMessage) error) error {
	inner := map[string]json.RawMessage{}
	if raw, ok := m[key]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &inner); err != nil {
			return err
		}
	}
	if err := edit(inner); err != nil {
		return err
	}
	b, err := json.Marshal(inner)
	m[key] = b
	return err
}
