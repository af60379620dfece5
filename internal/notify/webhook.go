package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/netguard"
)

// Webhook tells a chat channel (any Slack-compatible incoming webhook:
// Slack, Mattermost, Rocket.Chat, ...) of each call that starts waiting
// for approval, so a waiting call reaches a person who has no console
// open. The message names the tool, the caller, the execution and when it
// expires, never the arguments: those stay with toold, behind the approve
// role. Messages go out one at a time from a bounded queue, through the
// outbound guard, off the call's path: a slow or failing webhook delays no
// call, and is logged.
type Webhook struct {
	url    string
	client *http.Client
	log    *zap.Logger
	queue  chan executions.PendingApproval
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	URL string
	// Guard dials every request (required: the webhook is an outbound
	// connection like any other).
	Guard  *netguard.Guard
	Logger *zap.Logger
	// Timeout bounds one delivery (default 10 s).
	Timeout time.Duration
}

// webhookQueue bounds the messages waiting to be sent; past it a message
// is dropped (and logged): the console and GET /approvals still list the
// call.
const webhookQueue = 256

// NewWebhook starts a webhook's sender; Close stops it.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	if o.URL == "" || o.Guard == nil {
		return nil, errors.New("notify: a webhook needs a URL and the outbound guard")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	c := o.Guard.Client()
	c.Timeout = o.Timeout
	w := &Webhook{url: o.URL, client: c, log: o.Logger, queue: make(chan executions.PendingApproval, webhookQueue),
		quit: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// Notify queues the message of a call waiting for approval; it never
// blocks (executions.Options.OnApproval).
func (w *Webhook) Notify(a executions.PendingApproval) {
	select {
	case w.queue <- a:
	default:
		w.log.Warn("approval webhook: the queue is full; this approval is not announced", zap.String("execution_id", a.ID))
	}
}

// Close stops the sender once the message being sent is done; queued ones
// are dropped.
func (w *Webhook) Close() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

func (w *Webhook) run() {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case a := <-w.queue:
			if err := w.send(a); err != nil {
				w.log.Warn("approval webhook: not delivered", zap.String("execution_id", a.ID),
					zap.String("error", WebhookError(err, w.url)))
			}
		}
	}
}

// HideURL is how logs and errors show a webhook's URL: scheme and host,
// not the path, which is the secret of most webhooks (Slack's
// /services/T.../B.../<token>).
func HideURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(the webhook URL)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// WebhookError says what went wrong with the webhook at raw without
// repeating raw's path (see HideURL): a refusal of the outbound guard by
// its reason, any other error with the URL hidden.
func WebhookError(err error, raw string) string {
	shown := HideURL(raw)
	var re *netguard.RefusedError
	if errors.As(err, &re) {
		msg := "refused by toold's outbound guard (" + shown
		if re.Addr != "" {
			msg += ", " + re.Addr
		}
		return msg + "): " + re.Reason
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return strings.ReplaceAll(err.Error(), raw, shown)
}

// Message is the text sent for a call waiting for approval.
func Message(a executions.PendingApproval) string {
	return fmt.Sprintf("toold: %s, called by %s, waits for approval (execution %s; expires %s). "+
		"Decide in the toold console (/console/#approvals) or with POST /approvals/%s.",
		a.Tool, a.Caller, a.ID, a.ExpiresAt.UTC().Format(time.RFC3339), a.ID)
}

func (w *Webhook) send(a executions.PendingApproval) error {
	body, _ := json.Marshal(map[string]string{"text": Message(a)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
	return nil
}
