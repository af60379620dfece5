package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/toold/toold/internal/testpeer"
)

// providerSDKs is test/search's npm project: the official Anthropic and
// OpenAI TypeScript SDKs and TypeScript, installed by .ci/run with npm ci.
// Without them the test skips, saying what to run; with TOOLD_REQUIRE_NPM
// set (CI) it fails instead.
func providerSDKs(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../test/search")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"@anthropic-ai/sdk/package.json", "openai/package.json", ".bin/tsc"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			msg := "test/search's npm packages are not installed (" + p + " missing); run: npm ci --prefix test/search"
			testpeer.Missing(t, "TOOLD_REQUIRE_NPM", msg)
		}
	}
	return dir
}

// sdkCheck is a TypeScript program that assigns what toold answered to
// the SDKs' own request types, in requests a backend would send: the
// deferred listing as a Messages request's tools, the tool_result of
// tool_reference blocks as the answer to the model's search call, and the
// tool_search_output item in a Responses request's input. Object literals
// are checked for excess properties too, so a field the APIs do not take
// fails as surely as a missing one.
const sdkCheck = `import type { MessageCreateParamsNonStreaming, ToolUnion, ToolResultBlockParam } from "@anthropic-ai/sdk/resources/messages";
import type { ResponseCreateParamsNonStreaming, ResponseToolSearchOutputItemParam, ResponseInputItem, ToolSearchTool } from "openai/resources/responses/responses";

const tools: ToolUnion[] = %s;
const result: ToolResultBlockParam = %s;
export const anthropicRequest: MessageCreateParamsNonStreaming = {
  model: "claude-opus-4-5", max_tokens: 1024, tools,
  messages: [
    { role: "user", content: "Which pull requests are open?" },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_01", name: "search_tools", input: { query: "list pull requests" } }] },
    { role: "user", content: [result] },
  ],
};
const output: ResponseToolSearchOutputItemParam = %s;
const search: ToolSearchTool = { type: "tool_search", execution: "client" };
const input: ResponseInputItem[] = [output];
export const openaiRequest: ResponseCreateParamsNonStreaming = { model: "gpt-5.4", tools: [search], input };
`

// TestRenderingsTypeCheckAgainstSDKs: the deferred-loading listing, the
// tool_reference blocks and the tool_search_output item compile, as toold
// renders them, against @anthropic-ai/sdk's and openai's types under
// tsc --strict.
func TestRenderingsTypeCheckAgainstSDKs(t *testing.T) {
	dir := providerSDKs(t)
	h := newSearchHarness(t, nil)
	get := func(path string) []byte {
		r := h.do("GET", path, nil, nil)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		return r.body
	}
	listing := get("/tools?format=anthropic&defer_loading=true")
	refs := get("/tools/search?q=list+pull+requests&format=anthropic&call_id=toolu_01")
	output := get("/tools/search?q=list+pull+requests&format=openai-responses&call_id=call_01")
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(work, "check.ts")
	if err := os.WriteFile(src, []byte(fmt.Sprintf(sdkCheck, listing, refs, output)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", "tsc"), "--strict", "--noEmit", "--target", "es2022",
		"--module", "nodenext", "--moduleResolution", "nodenext", "--skipLibCheck", src)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("toold's renderings do not type-check against the SDKs: %v\n%s", err, out)
	}
}
