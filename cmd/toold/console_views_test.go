package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// pass lets ms of the page's time pass at once, as testing/synctest does
// for Go: the page's timers fire as they would over that time (virtual
// time, waiting for each fetch to answer), without the test sleeping.
// The page's clock stays stopped afterwards.
func (b *browser) pass(ms float64) {
	b.t.Helper()
	expired := make(chan struct{}, 1)
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*emulation.EventVirtualTimeBudgetExpired); ok {
			select {
			case expired <- struct{}{}:
			default:
			}
		}
	})
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetVirtualTimePolicy, emulation.SetVirtualTimePolicyParams{
			Policy: emulation.VirtualTimePolicyPauseIfNetworkFetchesPending, Budget: &ms})
		return err
	}))
	select {
	case <-expired:
	case <-time.After(30 * time.Second):
		b.t.Fatalf("the page's %v ms did not pass within 30 s", ms)
	}
}

// layout is what the page measures of itself: the viewport, how wide the
// page is (wider means it scrolls sideways), each tab's box and whether it
// is the element a tap at its centre reaches, and what sticks out.
type layout struct {
	Viewport, Height, Page float64
	Tabs                   []struct {
		ID                       string
		Left, Right, Top, Bottom float64
		Reached                  bool
	}
	Wide []string
}

const measureLayout = `(() => {
  window.scrollTo(0, 0);
  const w = window.innerWidth;
  const tabs = [...document.querySelectorAll('nav.tabs a')].map((a) => {
    const r = a.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return {id: a.id, left: r.left, right: r.right, top: r.top, bottom: r.bottom, reached: !!hit && a.contains(hit)};
  });
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '');
  const wide = [...document.body.querySelectorAll('*')].filter((e) => e.getBoundingClientRect().right > w + 0.5).slice(0, 8).map(name);
  return {viewport: w, height: window.innerHeight, page: document.documentElement.scrollWidth, tabs, wide};
})()`

// fits fails the test when the page, showing view, is wider than the
// screen or a tab is off it or covered.
func (b *browser) fits(view string, width float64) {
	b.t.Helper()
	l := eval[layout](b, measureLayout)
	if l.Viewport != width {
		b.t.Fatalf("%s: the viewport is %v px wide, not %v", view, l.Viewport, width)
	}
	if l.Page > l.Viewport {
		b.t.Errorf("%s at %v px: the page is %v px wide and scrolls sideways; sticking out: %v", view, width, l.Page, l.Wide)
	}
	if len(l.Tabs) != 6 {
		b.t.Errorf("%s: %d tabs, want 6", view, len(l.Tabs))
	}
	for _, tab := range l.Tabs {
		if tab.Left < 0 || tab.Right > l.Viewport || tab.Top < 0 || tab.Bottom > l.Height || !tab.Reached {
			b.t.Errorf("%s at %v px: the tab %s is not all on screen (%+v)", view, width, tab.ID, tab)
		}
	}
}

// TestConsoleOnAPhone: at 390 px wide (a phone) every view fits the
// screen, with what it shows — an approval, a question, a row of
// activity, a tool opened with its schema and form, the audit records —
// and every tab is on screen, the Audit tab included.
func TestConsoleOnAPhone(t *testing.T) {
	const width = 390
	in := consoleServer(t)
	callWaiting(t, in, "deploy release 2026.11.26 to the production cluster in eu-west, then run the migrations")
	if a := send(t, "POST", in.url+"/tools/request_user_input/execute", `{"prompt":"Which branch should the release be cut from?","choices":["main","release"]}`,
		bearer(consoleAgentKey)...); a.status != 202 {
		t.Fatalf("the question: %d %s", a.status, a.body)
	}
	b := newBrowser(t, in.url)
	b.do(chromedp.EmulateViewport(width, 844))
	for _, v := range []struct {
		view, key, ready string
		then             func()
	}{
		{"approvals", consoleApproverKey, "article.approval h3", nil},
		{"questions", consoleAgentKey, "article.question h3", nil},
		{"activity", consoleApproverKey, "#activity-status", func() {
			b.waitText("#activity-status", "Live")
			callWaiting(t, in, "watched")
			b.waitText("#activity-rows tr", "echo")
		}},
		{"tools", consoleAgentKey, "details.tool summary", func() {
			b.do(chromedp.Click(chromedp.CSS(`details.tool[data-tool="echo"] summary`)))
		}},
		{"audit", consoleAdminKey, "#audit-load", func() {
			b.do(chromedp.Click(chromedp.CSS("#audit-load")))
			b.waitText("#audit-status", "The chain holds")
		}},
		{"connections", consoleAgentKey, "#credential-form", nil},
	} {
		b.open(v.view, v.key)
		b.do(chromedp.WaitVisible(chromedp.CSS(v.ready)))
		if v.then != nil {
			v.then()
		}
		b.fits(v.view, width)
		if v.view == "approvals" {
			b.shot("phone")
		}
	}
}

// TestConsoleEmptyInboxes: with nothing waiting, Approvals and Questions
// say so and what will appear there; the note gives way to a card when
// one comes, and comes back when it is gone.
func TestConsoleEmptyInboxes(t *testing.T) {
	in := consoleServer(t)
	b := newBrowser(t, in.url)
	shown := func(sel string) bool {
		return eval[bool](b, `document.querySelector(`+jsString(sel)+`).checkVisibility()`)
	}
	waitShown := func(sel string, want bool) {
		t.Helper()
		if !eval[bool](b, `new Promise((done) => { const end = Date.now() + 10000;
			const check = () => { const v = document.querySelector(`+jsString(sel)+`).checkVisibility();
				if (v === `+map[bool]string{true: "true", false: "false"}[want]+` || Date.now() > end) done(v === `+
			map[bool]string{true: "true", false: "false"}[want]+`); else requestAnimationFrame(check); };
			check(); })`) {
			t.Fatalf("%s is not %s", sel, map[bool]string{true: "shown", false: "hidden"}[want])
		}
	}

	b.open("approvals", consoleApproverKey)
	waitShown("#approvals-empty", true)
	if text := strings.Join(strings.Fields(b.waitText("#approvals-empty", "Nothing is waiting for approval")), " "); !strings.Contains(text, "confirmation: human") ||
		!strings.Contains(text, "approve or deny") {
		t.Errorf("the empty inbox does not say what will appear there: %q", text)
	}
	b.shot("approvals-empty")
	id := callWaiting(t, in, "deploy")
	b.waitText(`article.approval[data-id="`+id+`"] h3`, "echo")
	waitShown("#approvals-empty", false)
	if a := send(t, "POST", in.url+"/approvals/"+id, `{"approve":false,"reason":"not now"}`, bearer(consoleApproverKey)...); a.status != 200 {
		t.Fatalf("deny: %d %s", a.status, a.body)
	}
	waitShown("#approvals-empty", true)

	b.open("questions", consoleAgentKey)
	waitShown("#questions-empty", true)
	if text := strings.Join(strings.Fields(b.waitText("#questions-empty", "No question is waiting for this key")), " "); !strings.Contains(text, "request_user_input") ||
		!strings.Contains(text, "form for the answer") {
		t.Errorf("the empty questions view does not say what will appear there: %q", text)
	}
	a := send(t, "POST", in.url+"/tools/request_user_input/execute", `{"prompt":"Which branch?","choices":["main","release"]}`, bearer(consoleAgentKey)...)
	env := decodeWaiting(t, a)
	b.waitText(`article.question[data-id="`+env.ExecutionID+`"] h3`, "Which branch?")
	waitShown("#questions-empty", false)

	// A key refused the listing is told why, not that nothing waits.
	b.open("approvals", consoleWatcherKey)
	b.waitText("#approvals-status", "does not have the approve role")
	if shown("#approvals-empty") {
		t.Error("a key without the approve role is told that nothing is waiting")
	}
}

// TestConsoleAuditNumbering: each audit record is numbered once, by its
// seq, which its line starts with; the list draws no marker of its own.
func TestConsoleAuditNumbering(t *testing.T) {
	in := consoleServer(t)
	for _, msg := range []string{"one", "two"} {
		id := callWaiting(t, in, msg)
		if a := send(t, "POST", in.url+"/approvals/"+id, `{"approve":false,"reason":"a test"}`, bearer(consoleApproverKey)...); a.status != 200 {
			t.Fatalf("deny: %d %s", a.status, a.body)
		}
	}
	in.waitAudited(t, 2) // the two decisions
	b := newBrowser(t, in.url)
	b.open("audit", consoleAdminKey)
	b.do(chromedp.Click(chromedp.CSS("#audit-load")))
	b.waitText("#audit-status", "The chain holds")
	recs := eval[[]struct {
		Text, Marker string
	}](b, `[...document.querySelectorAll('#audit-records li')].map((li) => ({text: li.textContent,
		marker: getComputedStyle(li).display === 'list-item' ? getComputedStyle(li).listStyleType : 'none'}))`)
	if len(recs) == 0 {
		t.Fatal("no audit record is shown")
	}
	for i, r := range recs {
		if r.Marker != "none" || !strings.HasPrefix(r.Text, "seq ") {
			t.Errorf("record %d is numbered by a %q marker besides its text %q", i, r.Marker, r.Text)
		}
	}
}
